// A trace path is a file or a directory of process ranks' rank-K.jsonl files: read_trace reads it
// as one (trace_file.cpp) or the other (rank_traces.cpp), and TraceFollower follows it through
// FileFollower or DirectoryFollower, decided when the path first exists (reader.hpp).
#include <system_error>

#include "directory_follower.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "file_follower.hpp"

namespace dpscope::trace {

namespace fs = std::filesystem;

namespace {

// A directory now, or named like one ("out/run/"): followed as process ranks' rank files.
bool names_directory(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) || (!path.empty() && !path.has_filename());
}

}  // namespace

TraceData read_trace(const fs::path& path, ReadOptions options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_rank_directory(path, options);
  return read_trace_file(path, options);
}

TraceFollower::TraceFollower(fs::path path, ReadOptions options) : path_(std::move(path)), options_(options) {
  if (names_directory(path_)) {
    directory_ = std::make_unique<detail::DirectoryFollower>(path_, options_);
  } else {
    file_ = std::make_unique<detail::FileFollower>(path_, options_);
  }
}

TraceFollower::~TraceFollower() = default;
TraceFollower::TraceFollower(TraceFollower&&) noexcept = default;
TraceFollower& TraceFollower::operator=(TraceFollower&&) noexcept = default;

size_t TraceFollower::poll() {
  // A path that did not exist when following began and has become a directory (a run started after
  // the viewer): its rank files are followed from now on.
  if (file_ != nullptr && !file_->has_header() && names_directory(path_)) {
    file_.reset();
    directory_ = std::make_unique<detail::DirectoryFollower>(path_, options_);
  }
  return directory_ != nullptr ? directory_->poll() : file_->poll();
}

bool TraceFollower::has_header() const {
  return directory_ != nullptr ? directory_->has_header() : file_->has_header();
}

const TraceData& TraceFollower::data() const {
  return directory_ != nullptr ? directory_->data() : file_->data();
}
TraceData& TraceFollower::data() { return directory_ != nullptr ? directory_->data() : file_->data(); }

size_t TraceFollower::restarts() const {
  return directory_ != nullptr ? directory_->restarts() : file_->restarts();
}

std::string TraceFollower::waiting_for() const {
  if (has_header()) return "";
  return directory_ != nullptr ? directory_->waiting_for() : path_.filename().string() + "'s header line";
}

}  // namespace dpscope::trace
