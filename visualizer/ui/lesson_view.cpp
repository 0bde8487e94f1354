// The lesson panel (lesson_view.hpp): chapter navigation that drives the player, narration,
// questions, the snippet, and knobs that re-run the scenario.
#include "ui/lesson_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ui/draw_util.hpp"
#include "ui/markdown.hpp"

namespace dpscope::viz {

bool answer_is_right(double given, double answer, double tolerance) {
  if (!std::isfinite(given)) return false;
  const double allowed = answer == 0.0 ? tolerance : tolerance * std::abs(answer);
  return std::abs(given - answer) <= allowed;
}

LessonView::LessonView(LessonScript script, LessonRerun rerun, LessonReload reload)
    : script_(std::move(script)), rerun_(std::move(rerun)), reload_(std::move(reload)) {
  answers_.resize(script_.questions.size());
  for (const LessonScript::Knob& k : script_.knobs) knob_values_[k.flag] = k.value;
}

void LessonView::follow(const ViewContext& ctx) {
  if (ctx.model == nullptr || ctx.playback == nullptr) return;
  const int64_t t = ctx.playback->cursor().t_ns;
  const int count = static_cast<int>(script_.chapters.size());
  // Playing across the next chapter's moment: stop there, so the narration is read before it runs on.
  if (ctx.playback->playing()) {
    for (int i = 0; i < count; ++i) {
      const std::optional<int64_t>& at = script_.chapters[static_cast<size_t>(i)].at_ns;
      if (i > chapter_ && at && *at > last_t_ns_ && *at <= t) {
        ctx.playback->set_playing(false);
        ctx.seek(ctx.model->at_time(*at));
        chapter_ = i;
        last_t_ns_ = *at;
        return;
      }
    }
  }
  // Otherwise the chapter is the last one whose moment has come (a seek may go either way).
  int current = -1;
  for (int i = 0; i < count; ++i) {
    const std::optional<int64_t>& at = script_.chapters[static_cast<size_t>(i)].at_ns;
    if (at && *at <= t) current = i;
  }
  chapter_ = current;
  last_t_ns_ = t;
}

void LessonView::go_to_chapter(const ViewContext& ctx, int index) {
  if (script_.chapters.empty() || ctx.model == nullptr) return;
  index = std::clamp(index, 0, static_cast<int>(script_.chapters.size()) - 1);
  const std::optional<int64_t>& at = script_.chapters[static_cast<size_t>(index)].at_ns;
  if (!at) return;  // its trigger never fired (dpscope lesson check reports it)
  if (ctx.playback != nullptr) ctx.playback->set_playing(false);
  ctx.seek(ctx.model->at_time(*at));
  chapter_ = index;
  last_t_ns_ = *at;
}

void LessonView::rerun() {
  if (!rerun_) return;
  const LessonRun run = rerun_(knob_values_);
  if (!run.error.empty()) {
    status_ = run.error;
    return;
  }
  if (compare_ != nullptr) compare_->show_lesson_runs({});  // its models go with the old script
  script_ = run.script;
  answers_.assign(script_.questions.size(), QuestionState{});
  chapter_ = -1;
  last_t_ns_ = INT64_MIN;
  status_ = fmt::format("re-ran in {:.2f} s: {}", run.seconds, script_.command);
  if (reload_) reload_(run.trace);
}

void LessonView::show_compared(const ViewContext& ctx) {
  if (compare_ == nullptr) return;
  std::vector<CompareView::LessonRun> runs;
  if (chapter_ >= 0 && ctx.model != nullptr)
    for (const LessonScript::Chapter::Compared& c : script_.chapters[static_cast<size_t>(chapter_)].compare) {
      CompareView::LessonRun r{.label = c.run, .at_ns = c.at_ns};
      if (c.run == "main") {
        r.label = "this run";
        r.model = ctx.model;
      } else {
        r.error = fmt::format("no run named '{}' beside the lesson's trace", c.run);
        for (const LessonScript::Run& run : script_.runs)
          if (run.name == c.run) {
            r.model = run.model.get();
            r.error = run.error;
          }
      }
      runs.push_back(std::move(r));
    }
  if (!runs.empty() && !compare_shown_) {
    compare_was_visible_ = compare_->visible;
    compare_->visible = true;
    compare_shown_ = true;
  } else if (runs.empty() && compare_shown_) {
    compare_->visible = compare_was_visible_;
    compare_shown_ = false;
  }
  compare_->show_lesson_runs(std::move(runs));
}

void LessonView::draw_problems(const ViewContext& ctx) {
  for (const std::string& p : script_.problems) {
    ImGui::PushStyleColor(ImGuiCol_Text, ctx.palette->warning);
    ImGui::TextWrapped("%s", p.c_str());
    ImGui::PopStyleColor();
  }
}

namespace {
// A narration as one paragraph per blank-line-separated block (the file's line breaks are wrapping).
std::string flowing(const std::string& narration) {
  std::string text;
  std::istringstream lines(narration);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) {
      text += "\n\n";
    } else {
      if (!text.empty() && !text.ends_with('\n')) text += ' ';
      text += line;
    }
  }
  return text;
}
}  // namespace

std::string LessonView::caption() const {
  if (chapter_ < 0) return fmt::format("{}: {}", script_.title, fmt::join(script_.goals, " "));
  const LessonScript::Chapter& c = script_.chapters[static_cast<size_t>(chapter_)];
  return fmt::format("{}. {}  {}", chapter_ + 1, c.title, flowing(c.narration));
}

std::vector<size_t> LessonView::chapter_questions() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < script_.questions.size(); ++i)
    if (script_.questions[i].chapter == chapter_ + 1) out.push_back(i);
  return out;
}

bool LessonView::handle_char(unsigned int c) {
  if (c != 'r' && c != 'R') return false;
  // The first question of the chapter still hidden; R again reveals the next one.
  for (size_t i : chapter_questions()) {
    if (!answers_[i].revealed) {
      answers_[i].revealed = true;
      return true;
    }
  }
  return false;
}

float LessonView::present_caption(const ViewContext& ctx, float width, bool measure) {
  float h = 0.0f;
  const float spacing = ImGui::GetStyle().ItemSpacing.y;
  auto md = [&](const std::string& text, float scale, ImU32 color) {
    if (text.empty()) return;
    h += (measure ? measure_markdown(ctx, text, width, scale)
                  : draw_markdown(ctx, text, width, scale, color)) +
         spacing;
  };
  const Palette& pal = *ctx.palette;
  for (const std::string& p : script_.problems) md(p, 0.85f, pal.warning);
  if (chapter_ < 0) {
    md(fmt::format("**{}**", script_.title), 1.1f, pal.text);
    std::string goals;
    for (const std::string& g : script_.goals) goals += "- " + g + "\n";
    md(goals, 1.0f, pal.text);
    md("Space or PgDn: the player stops at every chapter.", 0.85f, pal.text_dim);
    return h;
  }
  const LessonScript::Chapter& c = script_.chapters[static_cast<size_t>(chapter_)];
  md(fmt::format("**{}. {}**", chapter_ + 1, c.title), 1.1f, pal.text);
  md(c.narration, 1.0f, pal.text);
  // The questions one at a time: those answered (small, with their answer), then the next one
  // large, so it reads from the back of the room; R reveals its answer and brings the next.
  const std::vector<size_t> questions = chapter_questions();
  for (size_t k = 0; k < questions.size(); ++k) {
    const LessonScript::Question& q = script_.questions[questions[k]];
    const std::string prompt =
        fmt::format("**Predict:** {}{}", q.prompt, q.unit.empty() ? "" : fmt::format(" ({})", q.unit));
    if (answers_[questions[k]].revealed) {
      md(prompt, 1.0f, pal.text_dim);
      md(fmt::format("**Answer** (from this run's trace): {}{}", q.answer_text,
                     q.unit.empty() || !q.answer ? "" : fmt::format(" {}", q.unit)),
         1.1f, pal.optimizer);
      md(q.explain, 0.9f, pal.text);
      continue;
    }
    md(prompt, 1.25f, pal.selection);
    const size_t more = questions.size() - k - 1;
    md(more == 0 ? "R: reveal the answer"
                 : fmt::format("R: reveal the answer ({} more question{} after this one)", more,
                               more == 1 ? "" : "s"),
       0.85f, pal.text_dim);
    break;
  }
  return h;
}

void LessonView::draw(ViewContext& ctx) {
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  ImGui::PushFont(bold);
  ImGui::TextWrapped("%s", script_.title.c_str());
  ImGui::PopFont();
  draw_problems(ctx);
  draw_chapter(ctx);
  draw_questions(ctx);
  draw_snippet(ctx);
  draw_knobs(ctx);
}

void LessonView::draw_chapter(const ViewContext& ctx) {
  const int count = static_cast<int>(script_.chapters.size());
  ImGui::BeginDisabled(chapter_ <= 0);
  if (ImGui::Button("< chapter")) go_to_chapter(ctx, chapter_ - 1);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(chapter_ + 1 >= count);
  if (ImGui::Button("chapter >")) go_to_chapter(ctx, chapter_ + 1);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::TextDisabled("%d of %d", std::max(chapter_ + 1, 0), count);
  ImGui::Separator();
  if (chapter_ < 0) {
    ImGui::TextWrapped("What you will see:");
    for (const std::string& goal : script_.goals) ImGui::BulletText("%s", goal.c_str());
    ImGui::TextDisabled("Press \"chapter >\" or Play: the player stops at every chapter.");
    return;
  }
  const LessonScript::Chapter& c = script_.chapters[static_cast<size_t>(chapter_)];
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  ImGui::PushFont(bold);
  ImGui::TextWrapped("%d. %s", chapter_ + 1, c.title.c_str());
  ImGui::PopFont();
  draw_markdown(ctx, c.narration);
}

void LessonView::draw_questions(const ViewContext& ctx) {
  const Palette& pal = *ctx.palette;
  for (size_t i = 0; i < script_.questions.size(); ++i) {
    const LessonScript::Question& q = script_.questions[i];
    if (q.chapter != chapter_ + 1) continue;
    QuestionState& st = answers_[i];
    ImGui::Spacing();
    ImGui::PushID(static_cast<int>(i));
    draw_markdown(
        ctx, fmt::format("**Predict:** {}{}", q.prompt, q.unit.empty() ? "" : fmt::format(" ({})", q.unit)));
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
    ImGui::InputText("##answer", st.input, sizeof st.input);
    ImGui::SameLine();
    if (ImGui::Button("check") && q.answer) {
      char* end = nullptr;
      const double given = std::strtod(st.input, &end);
      if (end == st.input) {
        st.verdict = QuestionState::Verdict::kNotANumber;
      } else {
        st.verdict = answer_is_right(given, *q.answer, q.tolerance) ? QuestionState::Verdict::kRight
                                                                    : QuestionState::Verdict::kWrong;
      }
    }
    ImGui::SameLine();
    if (ImGui::Button("reveal")) st.revealed = true;
    switch (st.verdict) {
      case QuestionState::Verdict::kRight:
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.optimizer), "right");
        break;
      case QuestionState::Verdict::kWrong:
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warning), "not quite: try again, or reveal");
        break;
      case QuestionState::Verdict::kNotANumber:
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warning), "type a number");
        break;
      case QuestionState::Verdict::kNone: break;
    }
    if (st.revealed) {
      ImGui::TextWrapped("Answer (from this run's trace): %s%s", q.answer_text.c_str(),
                         q.unit.empty() || !q.answer ? "" : fmt::format(" {}", q.unit).c_str());
      if (!q.explain.empty()) draw_markdown(ctx, q.explain);
    }
    ImGui::PopID();
  }
}

void LessonView::draw_snippet(const ViewContext& ctx) {
  if (script_.snippet.empty()) return;
  ImGui::Spacing();
  if (!ImGui::CollapsingHeader("The same in PyTorch", ImGuiTreeNodeFlags_DefaultOpen)) return;
  const int highlight = chapter_ >= 0 ? script_.chapters[static_cast<size_t>(chapter_)].snippet_line : 0;
  const Palette& pal = *ctx.palette;
  // A box of its own, about 10 lines high, scrolled to the line that runs when the chapter changes.
  const float height = ImGui::GetTextLineHeightWithSpacing() * 10.5f;
  ImGui::BeginChild("snippet", ImVec2(0, height), true, ImGuiWindowFlags_HorizontalScrollbar);
  std::istringstream lines(script_.snippet);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const bool on = n == highlight;
    if (on) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(
          p, ImVec2(p.x + ImGui::GetContentRegionAvail().x, p.y + ImGui::GetTextLineHeight()),
          with_alpha(pal.selection, 0.45f));
      if (scrolled_to_ != chapter_) {
        ImGui::SetScrollHereY(0.35f);
        scrolled_to_ = chapter_;
      }
    }
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(on ? pal.text : pal.text_dim), "%2d  %s", n,
                       line.c_str());
  }
  ImGui::EndChild();
}

void LessonView::draw_knobs(const ViewContext& /*ctx*/) {
  if (script_.knobs.empty()) return;
  ImGui::Spacing();
  if (!ImGui::CollapsingHeader("Turn a knob, run it again")) return;
  for (const LessonScript::Knob& k : script_.knobs) {
    std::string& value = knob_values_[k.flag];
    ImGui::PushID(k.flag.c_str());
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 9);
    if (k.numeric) {
      float v = static_cast<float>(std::strtod(value.c_str(), nullptr));
      const bool integral = std::floor(k.step) == k.step && std::floor(k.min) == k.min;
      if (ImGui::SliderFloat(k.label.c_str(), &v, static_cast<float>(k.min), static_cast<float>(k.max),
                             integral ? "%.0f" : "%.3g")) {
        const double snapped = k.min + std::round((v - k.min) / k.step) * k.step;
        value = integral ? fmt::format("{}", static_cast<long long>(std::llround(snapped)))
                         : fmt::format("{}", snapped);
      }
    } else if (ImGui::BeginCombo(k.label.c_str(), value.c_str())) {
      for (const std::string& choice : k.choices)
        if (ImGui::Selectable(choice.c_str(), choice == value)) value = choice;
      ImGui::EndCombo();
    }
    ImGui::PopID();
  }
  if (ImGui::Button("run again")) rerun();
  if (!status_.empty()) ImGui::TextWrapped("%s", status_.c_str());
}

}  // namespace dpscope::viz
