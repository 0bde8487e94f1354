// dpscope-viz's lesson mode (lesson_mode.hpp).
#include "app/lesson_mode.hpp"

#include <unistd.h>

#include <charconv>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpscope/base/asset_dir.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/process.hpp"
#include "dpscope/lesson/catalog.hpp"
#include "dpscope/lesson/report.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::viz {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kRunDirPrefix = "dpscope-viz-lesson";

}  // namespace

LessonMode::LessonMode(const LessonModeOptions& options)
    : lessons_dir_(lesson::find_lessons_dir(asset_dir(), options.lessons_dir)) {
  lesson_ = lesson::find_lesson(lessons_dir_, options.id);
  knobs_ = lesson::parse_knobs(options.knobs);
  lesson::scenario_args(lesson_, knobs_);  // throws kUsage naming a bad knob or value
  lesson::remove_stale_run_dirs(fs::temp_directory_path(), kRunDirPrefix);  // of viewers killed outright
}

LessonMode::~LessonMode() = default;  // run_root_ removes the runs

LessonRun LessonMode::run(const std::map<std::string, std::string>& knobs) {
  LessonRun out;
  try {
    lesson::scenario_args(lesson_, knobs);
  } catch (const Error& e) {
    out.error = e.what();
    return out;
  }
  const fs::path dpscope = executable_dir() / "dpscope";
  if (access(dpscope.c_str(), X_OK) != 0) {
    out.error = fmt::format("cannot run the lesson: {} is not there (dpscope is built beside dpscope-viz)",
                            dpscope.string());
    return out;
  }
  if (!run_root_) {
    try {
      run_root_ = std::make_unique<lesson::TempRunDir>(kRunDirPrefix);
    } catch (const Error& e) {
      out.error = e.what();
      return out;
    }
    run_root_->remove_on_signal();
  }
  const fs::path dir = run_root_->path() / fmt::format("run-{}", ++runs_);
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::vector<std::string> argv = {dpscope.string(), "lesson", "run", lesson_.file.string(), "--lessons-dir",
                                   lessons_dir_.string(), "--out", dir.string(), "--no-viz",
                                   // A knob reruns only the runs it changes: the others' traces are
                                   // kept here by command line (runtime/cli/lesson_run_cache.hpp).
                                   "--reuse-runs", (run_root_->path() / "reused").string()};
  for (const auto& [flag, value] : knobs) {
    argv.push_back("--knob");
    argv.push_back(flag + "=" + value);
  }
  const fs::path log = dir / "run.log";
  const auto start = std::chrono::steady_clock::now();
  const int status = run_process(argv, log);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.trace = dir / (lesson_.id + ".trace.jsonl");
  if (status != 0 || !fs::is_regular_file(out.trace, ec)) {
    const std::string why = last_log_line(log);
    out.error = fmt::format("the run failed{}: {}", status > 0 ? fmt::format(" (exit {})", status) : "",
                            why.empty() ? log.string() : why);
    return out;
  }
  out.script = script(out.trace, knobs);
  return out;
}

LessonScript LessonMode::script(const fs::path& trace,
                                const std::map<std::string, std::string>& knobs) const {
  const trace::TraceData data = trace::read_trace(trace);
  LessonScript s;
  // The lesson's comparison runs, written beside its trace by `lesson run`: what its `@name(...)`
  // placeholders read and its compare chapters show. One that cannot be read is named in the panel,
  // with why; the text that needs it is then shown as written, and its column says why it is empty.
  lesson::ScenarioTraces other_traces;
  for (const lesson::OtherScenario& other : lesson_.scenarios) {
    LessonScript::Run run{.name = other.name};
    const fs::path path = lesson::other_trace_path(trace, lesson_, other);
    try {
      auto other_data = std::make_shared<trace::TraceData>(trace::read_trace(path));
      run.model = std::make_shared<ReplayModel>(*other_data);
      run.data = std::move(other_data);
      other_traces[other.name] = run.data.get();
    } catch (const std::exception& e) {
      run.error = e.what();
      s.problems.push_back(fmt::format("The comparison run '{}' cannot be shown ({}): {}", other.name,
                                       path.filename().string(), e.what()));
    }
    s.runs.push_back(std::move(run));
  }
  const lesson::LessonReport report = lesson::evaluate_lesson(lesson_, data, other_traces);
  s.id = lesson_.id;
  s.title = lesson_.title;
  s.goals = lesson_.goals;
  s.snippet = lesson_.snippet;
  s.command = fmt::format("dpscope {}", fmt::join(lesson::scenario_args(lesson_, knobs), " "));
  for (size_t c = 0; c < lesson_.chapters.size(); ++c) {
    const lesson::Chapter& chapter = lesson_.chapters[c];
    const std::optional<int64_t>& t = report.chapters[c].time_ns;
    s.chapters.push_back({.title = chapter.title,
                          .narration = report.chapters[c].narration,
                          .at_ns = t ? std::optional<int64_t>(data.min_ts_ns + *t) : std::nullopt,
                          .snippet_line = chapter.snippet_line});
    // Each compared run at its own moment, on its own trace clock.
    for (size_t k = 0; k < chapter.compare.size(); ++k) {
      const std::optional<int64_t>& at = report.chapters[c].compare_times_ns[k];
      const auto found = other_traces.find(chapter.compare[k]);
      const int64_t begin = found != other_traces.end() ? found->second->min_ts_ns : data.min_ts_ns;
      s.chapters.back().compare.push_back(
          {.run = chapter.compare[k], .at_ns = at ? std::optional<int64_t>(begin + *at) : std::nullopt});
    }
  }
  for (size_t q = 0; q < lesson_.questions.size(); ++q) {
    const lesson::Question& question = lesson_.questions[q];
    const lesson::QuestionResult& result = report.questions[q];
    s.questions.push_back(
        {.chapter = question.chapter,
         .prompt = result.prompt,
         .unit = question.unit,
         .explain = result.explain,
         .answer = result.value,
         .answer_text = result.value ? lesson::format_answer(*result.value) : result.problem,
         .tolerance = question.tolerance});
  }
  for (const lesson::Knob& k : lesson_.knobs) {
    LessonScript::Knob knob{.flag = k.flag,
                            .label = k.label,
                            .numeric = k.numeric,
                            .min = k.min,
                            .max = k.max,
                            .step = k.step,
                            .choices = k.choices,
                            .value = k.default_value};
    for (const auto& [flag, value] : knobs)
      if (lesson_.find_knob(flag) == &k) knob.value = value;
    s.knobs.push_back(std::move(knob));
  }
  return s;
}

std::optional<int> parse_chapter_seek(const std::string& seek) {
  if (!seek.starts_with("chapter:")) return std::nullopt;
  const std::string n = seek.substr(8);
  int chapter = 0;
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), chapter);
  if (n.empty() || ec != std::errc() || end != n.data() + n.size() || chapter < 1)
    throw Error(
        ErrorKind::kUsage,
        fmt::format("--seek '{}': the chapter is not a positive integer (chapters count from 1)", seek));
  return chapter;
}

void seek_to_chapter(Viewer& viewer, int chapter) {
  const LessonView* lesson = nullptr;
  for (View* v : viewer.views())
    if (const auto* l = dynamic_cast<const LessonView*>(v)) lesson = l;
  if (lesson == nullptr) throw Error(ErrorKind::kUsage, "--seek chapter:N needs --lesson");
  const auto& chapters = lesson->script().chapters;
  if (chapter > static_cast<int>(chapters.size()))
    throw Error(ErrorKind::kUsage, fmt::format("--seek chapter:{}: lesson {} has {} chapters", chapter,
                                               lesson->script().id, chapters.size()));
  const std::optional<int64_t>& at = chapters[static_cast<size_t>(chapter - 1)].at_ns;
  if (!at)
    throw Error(ErrorKind::kUsage, fmt::format("--seek chapter:{}: its moment never came in this run "
                                               "(dpscope lesson check names the trigger)",
                                               chapter));
  const Document* doc = viewer.active_document();
  if (doc == nullptr || doc->model() == nullptr) return;
  viewer.seek(doc->model()->at_time(*at));
}

void open_lesson(Viewer& viewer, const LessonModeOptions& options, const std::string& trace) {
  auto mode = std::make_shared<LessonMode>(options);
  LessonScript script;
  if (trace.empty()) {
    LessonRun first = mode->run(mode->knobs());
    if (!first.error.empty())
      throw Error(ErrorKind::kIo, fmt::format("lesson {}: {}", mode->lesson().id, first.error));
    viewer.open(first.trace, OpenOptions{});
    script = std::move(first.script);
  } else {
    viewer.open(trace, OpenOptions{});
    script = mode->script(trace, mode->knobs());
  }
  // The lesson panel takes the Plots' room (the View menu brings them back).
  for (View* v : viewer.views())
    if (std::string_view(v->title()) == "Plots") v->visible = false;
  auto view = std::make_unique<LessonView>(
      std::move(script), [mode](const std::map<std::string, std::string>& knobs) { return mode->run(knobs); },
      [&viewer](const fs::path& path) { viewer.replace_active_later(path); });
  view->set_compare(&viewer.compare());  // a compare chapter shows its runs there
  viewer.add_view(std::move(view));
}

}  // namespace dpscope::viz
