// Document: open/follow a trace file (or a directory of rank files), keep its error or warnings,
// and (re)build its ReplayModel.
#include "replay/document.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "dpscope/base/error.hpp"

namespace dpscope::viz {

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::unique_ptr<Document> Document::open(const std::filesystem::path& path, OpenOptions options) {
  std::unique_ptr<Document> doc(new Document(path, options));
  if (options.follow) {
    doc->follower_ =
        std::make_unique<trace::TraceFollower>(path, trace::ReadOptions{.strict = options.strict});
    doc->poll(std::chrono::steady_clock::time_point{}, std::chrono::milliseconds(0));
  } else {
    doc->load_whole_file();
  }
  return doc;
}

const trace::TraceData* Document::data() const {
  if (follower_ != nullptr) return follower_->has_header() ? &follower_->data() : nullptr;
  return data_.get();
}

void Document::load_whole_file() {
  const auto start = std::chrono::steady_clock::now();
  try {
    data_ = std::make_unique<trace::TraceData>(
        trace::read_trace(path_, trace::ReadOptions{.strict = options_.strict}));
  } catch (const std::exception& e) {
    error_ = e.what();
    data_.reset();
    return;
  }
  read_ms_ = ms_since(start);
  // The reader leaves a partial last line out (docs/trace-format.md: every reader tolerates it, as
  // a file still being written or cut off has one); it is shown as a warning, in every mode. A
  // directory's rank files each may have one. (The reader's line, not the file's last byte: a
  // compressed file's bytes say nothing about its lines.)
  std::vector<std::pair<std::string, uint32_t>> partial;
  for (const trace::RankSource& r : data_->ranks) partial.emplace_back(r.path, r.partial_line);
  if (data_->ranks.empty()) partial.emplace_back(path_.string(), data_->partial_line);
  for (const auto& [file, line] : partial) {
    if (line != 0) {
      warnings_.push_back(
          fmt::format("{}:{}: truncated: the last line has no end and was left out (was the file cut off "
                      "while being written?)",
                      file, line));
    }
  }
  add_problem_warnings(0);
  rebuild_model();
}

void Document::rebuild_model() {
  const trace::TraceData* d = data();
  if (d == nullptr) return;
  const auto start = std::chrono::steady_clock::now();
  try {
    model_ = std::make_unique<ReplayModel>(*d);
  } catch (const std::exception& e) {
    error_ = fmt::format("{}: cannot index the trace: {}", path_.string(), e.what());
    model_.reset();
    return;
  }
  ++generation_;
  last_build_ = std::chrono::steady_clock::now() - start;
  index_ms_ = ms_since(start);
  pending_events_ = 0;
  for (const std::string& w : model_->warnings()) {
    const std::string line = fmt::format("{}: {}", path_.string(), w);
    if (std::find(warnings_.begin(), warnings_.end(), line) == warnings_.end()) warnings_.push_back(line);
  }
}

bool Document::poll(std::chrono::steady_clock::time_point now, std::chrono::milliseconds min_interval) {
  if (follower_ == nullptr || !error_.empty()) return false;
  const auto interval = std::max<std::chrono::steady_clock::duration>(min_interval, 4 * last_build_);
  if (last_poll_ != std::chrono::steady_clock::time_point{} && now - last_poll_ < interval) return false;
  last_poll_ = now;
  const size_t problems_before = follower_->has_header() ? follower_->data().problems.size() : 0;
  try {
    pending_events_ += follower_->poll();
  } catch (const Error& e) {
    // A live file that does not exist yet is expected: keep waiting. Anything else is fatal.
    if (e.kind() == ErrorKind::kIo && !follower_->has_header()) {
      waiting_for_ = e.what();
      return false;
    }
    error_ = e.what();
    model_.reset();
    return true;
  } catch (const std::exception& e) {
    error_ = e.what();
    model_.reset();
    return true;
  }
  // A replaced file cleared the follower's data: the model must not keep indexing it.
  const bool restarted = follower_->restarts() != restarts_seen_;
  restarts_seen_ = follower_->restarts();
  if (restarted) {
    model_.reset();
    diagnosis_.reset();
    ++generation_;
  }
  if (!follower_->has_header()) return restarted;
  waiting_for_.clear();
  add_problem_warnings(problems_before);
  if (model_ != nullptr && pending_events_ == 0) return false;
  rebuild_model();
  return true;
}

void Document::add_problem_warnings(size_t first) {
  const trace::TraceData* d = data();
  if (d == nullptr) return;
  for (size_t i = first; i < d->problems.size(); ++i) {
    const trace::Problem& p = d->problems[i];
    warnings_.push_back(fmt::format("{}:{}: {}", p.file.empty() ? path_.string() : p.file, p.line, p.reason));
  }
}

const DiagnosisCache* Document::refresh_diagnosis(std::chrono::steady_clock::time_point now,
                                                  DiagnosisThrottle throttle) {
  const trace::TraceData* d = data();
  if (model_ == nullptr || d == nullptr) return nullptr;
  diagnosis_.update(*d, generation_, model_->last_step(), now, throttle);
  return &diagnosis_;
}

std::string Document::display_name() const {
  // "out/run/" (a directory of rank files) is named "run", as "out/run" is.
  return path_.has_filename() ? path_.filename().string() : path_.parent_path().filename().string();
}

std::string Document::live_status() const {
  if (follower_ == nullptr) return "";
  if (!follower_->has_header()) return "waiting for " + follower_->waiting_for();
  const trace::TraceData& d = follower_->data();
  if (!d.ranks.empty()) return fmt::format("live: {} events from {} ranks", d.events.size(), d.ranks.size());
  return fmt::format("live: {} events", d.events.size());
}

}  // namespace dpscope::viz
