// dpscope-viz --lesson ID: the lesson file loaded and evaluated on its trace, turned into the plain
// LessonScript the ui's lesson panel shows, and re-runs of its scenario when a knob turns.
//
// A run is `dpscope lesson run FILE --no-viz --out DIR [--knob ...]` started as a child process
// (the dpscope built beside dpscope-viz): the viewer receives every run as a trace file, like any
// other (the visualizer links the trace contract, not the training runtime).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/lesson/lesson.hpp"
#include "dpscope/lesson/run_dir.hpp"
#include "ui/lesson_view.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {

struct LessonModeOptions {
  std::string id;                  // "5", "05-ring-allreduce" or a .toml file
  std::string lessons_dir;         // "" : beside the assets
  std::vector<std::string> knobs;  // FLAG=VALUE
};

class LessonMode {
 public:
  // Loads the lesson and checks the knobs. Throws Error(kUsage) for an unknown lesson or knob.
  explicit LessonMode(const LessonModeOptions& options);
  ~LessonMode();  // removes the runs' directory (the viewer holds its traces in memory)
  LessonMode(const LessonMode&) = delete;
  LessonMode& operator=(const LessonMode&) = delete;

  const lesson::Lesson& lesson() const { return lesson_; }
  const std::map<std::string, std::string>& knobs() const { return knobs_; }

  // Runs the scenario with `knobs` into a fresh directory; the error says why a run failed.
  LessonRun run(const std::map<std::string, std::string>& knobs);
  // The script of a trace of this lesson's scenario run with `knobs`.
  LessonScript script(const std::filesystem::path& trace,
                      const std::map<std::string, std::string>& knobs) const;

 private:
  lesson::Lesson lesson_;
  std::filesystem::path lessons_dir_;
  std::map<std::string, std::string> knobs_;
  // This process's runs, made at the first one; removed by the destructor, on SIGINT and SIGTERM,
  // and by the next viewer's sweep when this one was killed outright (lesson/run_dir.hpp).
  std::unique_ptr<lesson::TempRunDir> run_root_;
  int runs_ = 0;
};

// Opens the lesson in `viewer`: `trace` when given (a run `dpscope lesson run` made), else a run of
// the scenario made now; adds the lesson panel. Throws Error for an unknown lesson or knob
// (kUsage) or a run that failed (kIo).
void open_lesson(Viewer& viewer, const LessonModeOptions& options, const std::string& trace);

// `--seek chapter:N`: N (1-based, as the panel counts chapters) from the text after "chapter:";
// nullopt when `seek` is another form. Throws Error(kUsage) for a chapter that is not a positive
// integer.
std::optional<int> parse_chapter_seek(const std::string& seek);
// Puts the playhead at the moment of chapter `chapter` (1-based) of the lesson panel open in
// `viewer`. Throws Error(kUsage) without a lesson panel, for a chapter the lesson does not have,
// or one whose moment never came in this run.
void seek_to_chapter(Viewer& viewer, int chapter);

}  // namespace dpscope::viz
