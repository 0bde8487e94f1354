// Reading lesson files (lesson/lesson.hpp): TOML via toml++, every key checked against the format
// (docs/lessons.md) so a typo is one line naming FILE:LINE and the key instead of a silently
// ignored setting.
#include <toml++/toml.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/lesson.hpp"

namespace dpscope::lesson {
namespace {

namespace fs = std::filesystem;

const char* type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

// Reads one lesson file; every error is "FILE:LINE: message".
class LessonReader {
 public:
  explicit LessonReader(fs::path file) : file_(std::move(file)) {}

  Lesson read() {
    toml::table root;
    try {
      root = toml::parse_file(file_.string());
    } catch (const toml::parse_error& e) {
      fail(e.source().begin.line, std::string(e.description()));
    }
    Lesson lesson;
    lesson.file = file_;
    check_keys(root,
               {"id", "title", "goals", "minutes", "scenario", "knobs", "snippet", "chapters", "questions"},
               "the lesson");
    lesson.id = string(root, "id", "the lesson");
    if (lesson.id != file_.stem().string())
      fail(line_of(root, "id"), fmt::format("id '{}' must be the file's name without .toml ('{}')", lesson.id,
                                            file_.stem().string()));
    lesson.title = string(root, "title", "the lesson");
    for (const toml::node* goal : array(root, "goals", "the lesson"))
      lesson.goals.push_back(as_string(*goal, "goals"));
    const int64_t minutes = integer(root, "minutes", "the lesson");
    if (minutes < 1 || minutes > 240)
      fail(line_of(root, "minutes"), fmt::format("minutes must be 1 to 240, got {}", minutes));
    lesson.minutes = static_cast<int>(minutes);
    lesson.snippet = string(root, "snippet", "the lesson");
    read_scenario(table(root, "scenario", "the lesson"), lesson);
    if (root.contains("knobs"))
      for (const toml::table* t : tables(root, "knobs", "the lesson"))
        lesson.knobs.push_back(read_knob(*t, lesson));
    for (const toml::table* t : tables(root, "chapters", "the lesson"))
      lesson.chapters.push_back(read_chapter(*t, lesson));
    if (lesson.chapters.empty()) fail(line_of(root, "chapters"), "a lesson needs at least one [[chapters]]");
    if (root.contains("questions")) {
      int n = 0;
      for (const toml::table* t : tables(root, "questions", "the lesson"))
        lesson.questions.push_back(read_question(*t, lesson, ++n));
    }
    return lesson;
  }

 private:
  [[noreturn]] void fail(int64_t line, const std::string& message) const {
    throw Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", file_.string(), line, message));
  }
  static int64_t line_of(const toml::node& node) { return node.source().begin.line; }
  int64_t line_of(const toml::table& t, std::string_view key) const {
    const toml::node* node = t.get(key);
    return node ? line_of(*node) : line_of(t);
  }

  void check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed,
                  std::string_view context) {
    for (const auto& [key, node] : t) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      fail(key.source().begin.line > 0 ? key.source().begin.line : line_of(node),
           fmt::format("unknown key '{}' in {} (expected one of: {})", key.str(), context,
                       fmt::join(allowed, ", ")));
    }
  }

  const toml::node& require(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node* node = t.get(key);
    if (!node) fail(line_of(t), fmt::format("{} is missing '{}'", context, key));
    return *node;
  }
  [[noreturn]] void wrong_type(const toml::node& node, std::string_view key, std::string_view want) {
    fail(line_of(node), fmt::format("'{}' must be {}, got {}", key, want, type_name(node.type())));
  }

  std::string as_string(const toml::node& node, std::string_view key) {
    if (const auto* s = node.as_string()) return s->get();
    wrong_type(node, key, "a string");
  }
  std::string string(const toml::table& t, std::string_view key, std::string_view context) {
    return as_string(require(t, key, context), key);
  }
  int64_t integer(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node& node = require(t, key, context);
    if (const auto* i = node.as_integer()) return i->get();
    wrong_type(node, key, "an integer");
  }
  double as_number(const toml::node& node, std::string_view key) {
    if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
    if (const auto* f = node.as_floating_point()) return f->get();
    wrong_type(node, key, "a number");
  }
  const toml::table& table(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node& node = require(t, key, context);
    if (const auto* table = node.as_table()) return *table;
    wrong_type(node, key, "a table");
  }
  std::vector<const toml::node*> array(const toml::table& t, std::string_view key, std::string_view context) {
    const toml::node& node = require(t, key, context);
    const toml::array* a = node.as_array();
    if (!a) wrong_type(node, key, "an array");
    std::vector<const toml::node*> items;
    for (const toml::node& item : *a) items.push_back(&item);
    return items;
  }
  std::vector<const toml::table*> tables(const toml::table& t, std::string_view key,
                                         std::string_view context) {
    std::vector<const toml::table*> out;
    for (const toml::node* item : array(t, key, context)) {
      const toml::table* table = item->as_table();
      if (!table)
        fail(line_of(*item), fmt::format("'{}' must be an array of tables ([[{}]]), got {}", key, key,
                                         type_name(item->type())));
      out.push_back(table);
    }
    return out;
  }

  void read_scenario(const toml::table& t, Lesson& lesson) {
    check_keys(t, {"args", "expect_error"}, "[scenario]");
    if (t.contains("expect_error")) {
      lesson.expect_error = string(t, "expect_error", "[scenario]");
      if (lesson.expect_error.empty())
        fail(line_of(t, "expect_error"),
             "[scenario] expect_error must be a part of the error message the run ends with, not empty");
    }
    for (const toml::node* arg : array(t, "args", "[scenario]"))
      lesson.scenario.push_back(as_string(*arg, "args"));
    const int64_t line = line_of(t, "args");
    if (lesson.scenario.empty() || (lesson.scenario[0] != "train" && lesson.scenario[0] != "bench"))
      fail(line, "[scenario] args must start with \"train\" or \"bench\" (a dpscope command line)");
    for (const std::string& arg : lesson.scenario)
      if (arg == "--trace" || arg.starts_with("--trace="))
        fail(line, "[scenario] args must not give --trace: the lesson chooses where the trace goes");
  }

  Knob read_knob(const toml::table& t, const Lesson& lesson) {
    check_keys(t, {"flag", "label", "min", "max", "step", "choices", "switch", "default"}, "[[knobs]]");
    Knob knob;
    knob.flag = string(t, "flag", "[[knobs]]");
    if (!knob.flag.starts_with("--"))
      fail(line_of(t, "flag"), fmt::format("knob flag '{}' must start with --", knob.flag));
    knob.label = string(t, "label", "[[knobs]]");
    for (const std::string& arg : lesson.scenario)
      if (arg == knob.flag)
        fail(line_of(t, "flag"),
             fmt::format("{} is a knob: leave it out of [scenario] args (its default applies)", knob.flag));
    if (lesson.find_knob(knob.flag)) fail(line_of(t, "flag"), fmt::format("two knobs turn {}", knob.flag));
    const toml::node& def = require(t, "default", "[[knobs]]");
    if (t.contains("switch")) {
      const toml::node& node = *t.get("switch");
      if (!node.as_boolean() || !node.as_boolean()->get()) wrong_type(node, "switch", "true (or left out)");
      knob.is_switch = true;
      knob.choices = {"off", "on"};
      knob.default_value = as_string(def, "default");
    } else if (t.contains("choices")) {
      for (const toml::node* c : array(t, "choices", "[[knobs]]"))
        knob.choices.push_back(as_string(*c, "choices"));
      if (knob.choices.empty()) fail(line_of(t, "choices"), "choices must not be empty");
      knob.default_value = as_string(def, "default");
    } else {
      knob.numeric = true;
      knob.min = as_number(require(t, "min", "[[knobs]] without choices"), "min");
      knob.max = as_number(require(t, "max", "[[knobs]] without choices"), "max");
      if (t.contains("step")) knob.step = as_number(*t.get("step"), "step");
      if (!(knob.min <= knob.max) || !(knob.step > 0))
        fail(line_of(t), fmt::format("knob {}: needs min <= max and step > 0", knob.flag));
      const double value = as_number(def, "default");
      knob.default_value = std::floor(value) == value ? fmt::format("{}", static_cast<int64_t>(value))
                                                      : fmt::format("{}", value);
    }
    if (const std::string problem = knob.check(knob.default_value); !problem.empty())
      fail(line_of(def), fmt::format("default: {}", problem));
    return knob;
  }

  Chapter read_chapter(const toml::table& t, const Lesson& lesson) {
    const std::string context = fmt::format("[[chapters]] {}", lesson.chapters.size() + 1);
    check_keys(t, {"title", "trigger", "narration", "snippet_line"}, context);
    Chapter chapter;
    chapter.title = string(t, "title", context);
    chapter.narration = string(t, "narration", context);
    const toml::table& trigger = table(t, "trigger", context);
    for (const auto& [key, node] : trigger) {
      FilterValue value;
      if (const auto* i = node.as_integer()) {
        value = i->get();
      } else if (const auto* s = node.as_string()) {
        value = s->get();
      } else {
        wrong_type(node, key.str(), "an integer or a string");
      }
      if (const std::string problem = set_filter_key(chapter.trigger, key.str(), value); !problem.empty())
        fail(line_of(node), fmt::format("{} trigger: {}", context, problem));
    }
    if (chapter.trigger.nth == 0) chapter.trigger.nth = 1;
    std::ostringstream text;
    text << trigger;
    chapter.trigger.text = text.str();
    const int64_t line = integer(t, "snippet_line", context);
    if (line < 1 || line > lesson.snippet_lines())
      fail(line_of(t, "snippet_line"),
           fmt::format("{} snippet_line must be 1 to {} (the snippet's lines), got {}", context,
                       lesson.snippet_lines(), line));
    chapter.snippet_line = static_cast<int>(line);
    return chapter;
  }

  Question read_question(const toml::table& t, const Lesson& lesson, int number) {
    const std::string context = fmt::format("question {}", number);
    check_keys(t, {"chapter", "prompt", "answer", "unit", "tolerance", "explain"}, context);
    Question q;
    const int64_t chapter = integer(t, "chapter", context);
    if (chapter < 1 || chapter > static_cast<int64_t>(lesson.chapters.size()))
      fail(line_of(t, "chapter"),
           fmt::format("{} chapter must be 1 to {}, got {}", context, lesson.chapters.size(), chapter));
    q.chapter = static_cast<int>(chapter);
    q.prompt = string(t, "prompt", context);
    const std::string answer = string(t, "answer", context);
    try {
      q.answer = Expression::parse(answer);
    } catch (const Error& e) {
      fail(line_of(t, "answer"), fmt::format("lesson {}, {}: answer {}", lesson.id, context, e.what()));
    }
    q.unit = string(t, "unit", context);
    if (t.contains("tolerance")) {
      q.tolerance = as_number(*t.get("tolerance"), "tolerance");
      if (!(q.tolerance >= 0.0 && q.tolerance < 1.0))
        fail(line_of(t, "tolerance"),
             fmt::format("{} tolerance is relative: 0 to below 1, got {}", context, q.tolerance));
    }
    if (t.contains("explain")) q.explain = as_string(*t.get("explain"), "explain");
    return q;
  }

  fs::path file_;
};

}  // namespace

std::string Knob::check(const std::string& value) const {
  if (!numeric) {
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) return "";
    return fmt::format("{} must be one of: {}; got '{}'", flag, fmt::join(choices, ", "), value);
  }
  double number = 0.0;
  size_t used = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const double steps = (number - min) / step;
  const bool on_grid = std::abs(steps - std::round(steps)) < 1e-9;
  if (used == 0 || used != value.size() || !(number >= min && number <= max) || !on_grid)
    return fmt::format("{} must be a number from {} to {} in steps of {}, got '{}'", flag, min, max, step,
                       value);
  return "";
}

const Knob* Lesson::find_knob(std::string_view flag) const {
  for (const Knob& k : knobs)
    if (k.flag == flag || std::string_view(k.flag).substr(2) == flag) return &k;
  return nullptr;
}

int Lesson::snippet_lines() const {
  if (snippet.empty()) return 0;
  const auto newlines = std::count(snippet.begin(), snippet.end(), '\n');
  return static_cast<int>(newlines) + (snippet.back() == '\n' ? 0 : 1);
}

Lesson load_lesson(const std::filesystem::path& file) {
  std::error_code ec;
  DPS_CHECK(std::filesystem::is_regular_file(file, ec), ErrorKind::kIo, "lesson {}: no such file",
            file.string());
  return LessonReader(file).read();
}

std::vector<std::filesystem::path> lesson_files(const std::filesystem::path& dir) {
  std::error_code ec;
  DPS_CHECK(std::filesystem::is_directory(dir, ec), ErrorKind::kIo, "lessons directory {} does not exist",
            dir.string());
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Lesson> load_lessons(const std::filesystem::path& dir) {
  std::vector<Lesson> lessons;
  for (const auto& file : lesson_files(dir)) lessons.push_back(load_lesson(file));
  return lessons;
}

std::vector<std::string> scenario_args(const Lesson& lesson,
                                       const std::map<std::string, std::string>& overrides) {
  for (const auto& [flag, value] : overrides) {
    const Knob* knob = lesson.find_knob(flag);
    std::vector<std::string> flags;
    for (const Knob& k : lesson.knobs) flags.push_back(k.flag);
    DPS_CHECK(knob != nullptr, ErrorKind::kUsage, "lesson {} has no knob {} (its knobs: {})", lesson.id, flag,
              flags.empty() ? "none" : fmt::format("{}", fmt::join(flags, ", ")));
    const std::string problem = knob->check(value);
    DPS_CHECK(problem.empty(), ErrorKind::kUsage, "lesson {}: {}", lesson.id, problem);
  }
  std::vector<std::string> args = lesson.scenario;
  for (const Knob& knob : lesson.knobs) {
    std::string value = knob.default_value;
    for (const auto& [flag, v] : overrides)
      if (lesson.find_knob(flag) == &knob) value = v;
    if (knob.is_switch) {
      if (value == "on") args.push_back(knob.flag);
    } else if (value != "none") {
      args.push_back(knob.flag);
      args.push_back(value);
    }
  }
  return args;
}

}  // namespace dpscope::lesson
