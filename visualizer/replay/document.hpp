// Document: one trace opened in the visualizer — a finished file read at once, or a live file
// followed with trace::TraceFollower; either may be a directory of process ranks' rank-K.jsonl
// files, merged into one timeline by the trace reader — and its ReplayModel. Opening never throws: a file
// that cannot be shown keeps its one-line error ("TRACE:LINE: reason") for the on-screen message and for the
// headless exit. Used by the Viewer (ui/) and by dpscope-viz's headless modes. No GL.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/diagnosis.hpp"
#include "replay/replay_model.hpp"

namespace dpscope::viz {

struct OpenOptions {
  // Headless runs: the first malformed line is an error. Interactive runs show what could be read,
  // with the problems listed on screen. A truncated last line is left out with a warning in both.
  bool strict = false;
  // Live mode: tail a file that is still being written; a partial last line is expected.
  bool follow = false;
};

class Document {
 public:
  static std::unique_ptr<Document> open(const std::filesystem::path& path, OpenOptions options);

  const std::filesystem::path& path() const { return path_; }
  std::string display_name() const;
  bool following() const { return follower_ != nullptr; }
  // A fatal problem: nothing can be shown. One line, naming the file (and line when there is one).
  const std::string& error() const { return error_; }
  // Why a followed trace is still awaited (its file missing, a FIFO, a rank file absent): the last
  // read error before its header, "" once it has one.
  const std::string& waiting_for() const { return waiting_for_; }
  // Lines that were skipped, a truncated end, model warnings: the trace is shown nonetheless.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Null until a model exists (a live file may not have its header yet).
  const ReplayModel* model() const { return model_.get(); }
  const trace::TraceData* data() const;
  // Increases each time the model is rebuilt (views that cache per-model data compare it).
  uint64_t generation() const { return generation_; }
  double read_ms() const { return read_ms_; }
  double index_ms() const { return index_ms_; }

  // Live mode: reads what was appended and rebuilds the model when there is something new, at
  // most once per `min_interval` (and never more often than 4x the last rebuild's cost, so a huge
  // live file stays responsive). Returns true when the model changed.
  bool poll(std::chrono::steady_clock::time_point now,
            std::chrono::milliseconds min_interval = std::chrono::milliseconds(100));
  // A short status for the live indicator: "waiting for run.jsonl's header line", "live: 12345
  // events"; for a directory "waiting for rank-2.jsonl (2 of 4 ranks have written their header)",
  // "live: 12345 events from 4 ranks".
  std::string live_status() const;

  // The DDP diagnosis of what has been read (trace::diagnose_ddp): computed on the first call,
  // then again for a live file as it grows, throttled as replay/diagnosis.hpp says. Null until
  // the trace has a model. Called by the Viewer while the Diagnosis panel is on.
  const DiagnosisCache* refresh_diagnosis(std::chrono::steady_clock::time_point now,
                                          DiagnosisThrottle throttle = {});
  const DiagnosisCache& diagnosis() const { return diagnosis_; }

 private:
  Document(std::filesystem::path path, OpenOptions options) : path_(std::move(path)), options_(options) {}
  void load_whole_file();
  void rebuild_model();
  // Warnings for the reader's problems from `first` on (skipped lines, named by their file).
  void add_problem_warnings(size_t first);

  std::filesystem::path path_;
  OpenOptions options_;
  std::string error_;
  std::string waiting_for_;
  std::vector<std::string> warnings_;
  std::unique_ptr<trace::TraceData> data_;          // finished file
  std::unique_ptr<trace::TraceFollower> follower_;  // live file
  std::unique_ptr<ReplayModel> model_;
  DiagnosisCache diagnosis_;
  uint64_t generation_ = 0;
  size_t restarts_seen_ = 0;   // follower restarts (file replaced) already handled
  size_t pending_events_ = 0;  // read by the follower, not yet in the model
  std::chrono::steady_clock::time_point last_poll_{};
  std::chrono::steady_clock::duration last_build_{};
  double read_ms_ = 0.0;
  double index_ms_ = 0.0;
};

}  // namespace dpscope::viz
