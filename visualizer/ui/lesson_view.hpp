// LessonView: the lesson panel of `dpscope-viz --lesson ID` — the chapter's narration (the player
// stops at every chapter's moment), the PyTorch snippet with the line that runs highlighted,
// predict-then-reveal questions, previous/next chapter, and the knobs a student may turn, each turn
// re-running the scenario and reloading its trace.
//
// The ui layer sees only the trace contract, so the lesson reaches it as plain data: the app layer
// (app/lesson_mode.cpp) loads the lesson file, evaluates it on the trace, and fills a LessonScript;
// a re-run is a callback that returns the new trace and its script (the viewer still gets every
// run as a trace).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ui/compare_view.hpp"
#include "ui/view.hpp"

namespace dpscope::viz {

struct LessonScript {
  struct Chapter {
    std::string title;
    std::string narration;
    std::optional<int64_t> at_ns;  // on the trace clock; nullopt: its trigger never fired
    int snippet_line = 0;          // 1-based line of the snippet to highlight; 0: none
    // A chapter that compares: its runs in order, each at its own moment on its own trace clock
    // (the chapter's trigger matched in that run). Empty: the lesson's run alone.
    struct Compared {
      std::string run;  // "main" (the lesson's own run, the trace on screen) or a Run's name
      std::optional<int64_t> at_ns;
    };
    std::vector<Compared> compare;
  };
  // The lesson's other runs ([[scenarios]]), read from beside its trace for the compare chapters.
  struct Run {
    std::string name;  // "tree"
    std::shared_ptr<const trace::TraceData> data;
    std::shared_ptr<const ReplayModel> model;  // null when its trace could not be read
    std::string error;                         // why not: "FILE: no such file"
  };
  struct Question {
    int chapter = 1;  // 1-based
    std::string prompt;
    std::string unit;  // "bytes", "us", "" for a count
    std::string explain;
    std::optional<double> answer;  // computed from the trace; nullopt when it cannot be
    std::string answer_text;       // the answer in significant digits, or why it cannot be computed
    double tolerance = 0.01;       // relative
  };
  struct Knob {
    std::string flag;   // "--devices"
    std::string label;  // "GPUs"
    bool numeric = false;
    double min = 0.0, max = 0.0, step = 1.0;
    std::vector<std::string> choices;
    std::string value;  // as it ran
  };
  std::string id;
  std::string title;
  std::vector<std::string> goals;
  std::string command;  // the scenario's command line as it ran
  std::string snippet;
  std::vector<Chapter> chapters;
  std::vector<Question> questions;
  std::vector<Knob> knobs;
  std::vector<Run> runs;
  // What the panel must say in its own words: a comparison trace that cannot be read, and why.
  std::vector<std::string> problems;
};

// What a re-run returns: the new trace and its script, or an error line (the old run stays).
struct LessonRun {
  std::filesystem::path trace;
  LessonScript script;
  std::string error;
  double seconds = 0.0;  // wall time of the run
};
using LessonRerun = std::function<LessonRun(const std::map<std::string, std::string>& knobs)>;
// Opens `trace` in place of the lesson's current one.
using LessonReload = std::function<void(const std::filesystem::path& trace)>;

// Whether `given` answers a question whose answer is `answer`: within `tolerance` of it, relative
// (absolute when the answer is 0).
bool answer_is_right(double given, double answer, double tolerance);

class LessonView final : public View {
 public:
  LessonView(LessonScript script, LessonRerun rerun, LessonReload reload);
  const char* title() const override { return "Lesson"; }
  float layout_weight() const override { return 2.2f; }
  void before_draw(const ViewContext& ctx) override {
    follow(ctx);
    show_compared(ctx);
  }
  // The viewer's compare view: a compare chapter shows its runs there, in the stage's place.
  void set_compare(CompareView* compare) { compare_ = compare; }
  // The chapter's title and narration (the goals before the first chapter).
  std::string caption() const override;
  // Presentation mode: chapter, narration, and the chapter's questions large; R reveals the answers.
  float present_caption(const ViewContext& ctx, float width, bool measure) override;
  bool handle_char(unsigned int c) override;
  // The chapter's questions (indices into script().questions) and whether each is revealed.
  std::vector<size_t> chapter_questions() const;
  bool revealed(size_t question) const { return answers_[question].revealed; }
  void draw(ViewContext& ctx) override;

  // ---- for the viewer's keys and for tests ----
  const LessonScript& script() const { return script_; }
  int chapter() const { return chapter_; }  // 0-based; -1 before the first chapter's moment
  // Moves to chapter `index` (clamped): the playhead to its moment, paused.
  void go_to_chapter(const ViewContext& ctx, int index);
  // Follows the playhead: the chapter whose moment has come, pausing the player when playback
  // crosses the next one (called every frame, through before_draw()).
  void follow(const ViewContext& ctx);
  // Re-runs the scenario with the knobs as set, and reloads on success (the Run button).
  void rerun();
  const std::string& status() const { return status_; }
  std::map<std::string, std::string>& knob_values() { return knob_values_; }

 private:
  struct QuestionState {
    char input[32] = {};
    enum class Verdict { kNone, kRight, kWrong, kNotANumber } verdict = Verdict::kNone;
    bool revealed = false;
  };
  void draw_chapter(const ViewContext& ctx);
  void draw_snippet(const ViewContext& ctx);
  void draw_questions(const ViewContext& ctx);
  void draw_knobs(const ViewContext& ctx);
  void draw_problems(const ViewContext& ctx);
  // Hands the chapter's runs to the compare view (and turns it on), or takes them back.
  void show_compared(const ViewContext& ctx);

  LessonScript script_;
  LessonRerun rerun_;
  LessonReload reload_;
  int chapter_ = -1;
  int scrolled_to_ = -2;           // the chapter the snippet was last scrolled for
  int64_t last_t_ns_ = INT64_MIN;  // the playhead's time at the previous follow()
  std::vector<QuestionState> answers_;
  std::map<std::string, std::string> knob_values_;
  std::string status_;  // the last re-run: "re-ran in 0.31 s" or its error
  CompareView* compare_ = nullptr;
  bool compare_shown_ = false;        // the compare view shows this lesson's runs
  bool compare_was_visible_ = false;  // and whether it was on before
};

}  // namespace dpscope::viz
