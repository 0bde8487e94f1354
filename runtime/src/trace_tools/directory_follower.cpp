// DirectoryFollower (directory_follower.hpp): process ranks' growing rank files, merged as they grow.
#include "directory_follower.hpp"

#include <algorithm>
#include <system_error>
#include <vector>

#include "dpscope/base/error.hpp"
#include "event_copy.hpp"

namespace dpscope::trace::detail {

namespace fs = std::filesystem;

namespace {

// A rank file that appeared beside the files of a run of `world_size` ranks.
void check_in_run(const fs::path& file, int rank, int world_size) {
  DPS_CHECK(
      rank < world_size, ErrorKind::kFormat,
      "{}: rank {}, but the run has ranks 0 to {} (world_size in their headers): the rank files are not of "
      "one run",
      file.string(), rank, world_size - 1);
}

}  // namespace

DirectoryFollower::DirectoryFollower(fs::path dir, ReadOptions options)
    : dir_(std::move(dir)), options_(options) {
  data_.path = dir_.string();
}

void DirectoryFollower::restart() {
  ranks_.clear();
  merge_.reset();
  data_ = TraceData{};
  data_.path = dir_.string();
  ++restarts_;
}

int DirectoryFollower::check_headers() {
  const TraceData* reference = nullptr;
  int world_size = 0;
  for (auto& [rank, r] : ranks_) {
    if (!r.follower->has_header()) continue;
    const TraceData& data = r.follower->data();
    const ProcessEntry process = rank_process_entry(data, rank);
    if (reference == nullptr) {
      reference = &data;
      world_size = process.world_size;
    }
    check_same_run(data, process, *reference, world_size);
  }
  return world_size;
}

void DirectoryFollower::start_merge() {
  std::vector<const TraceData*> headers;
  for (const auto& [rank, r] : ranks_) headers.push_back(&r.follower->data());
  merge_ = std::make_unique<RankMerge>(dir_, headers);
  data_ = merge_->start(dir_);
}

size_t DirectoryFollower::merge_new_events() {
  const size_t before = data_.events.size();
  bool partial = false;
  int64_t edge = INT64_MAX;
  for (auto& [rank, r] : ranks_) {
    TraceData& rank_data = r.follower->data();
    r.latest_ns = std::max(r.latest_ns, merge_->append_events(data_, rank, rank_data, options_.strict));
    drop_events(rank_data);  // merged: they live on in the merged trace only
    data_.ranks[static_cast<size_t>(rank)].partial_last_line = rank_data.partial_last_line;
    data_.ranks[static_cast<size_t>(rank)].partial_line = rank_data.partial_line;
    partial = partial || rank_data.partial_last_line;
    edge = std::min(edge, r.latest_ns);  // INT64_MIN while a rank has written no event
  }
  data_.partial_last_line = partial;
  data_.ranks_written_until_ns = edge;
  return data_.events.size() - before;
}

size_t DirectoryFollower::poll() {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return 0;  // not made yet (or gone): look again at the next poll
  for (const auto& [rank, path] : list_rank_files(dir_)) {
    if (ranks_.count(rank) > 0) continue;
    if (merge_ != nullptr) check_in_run(path, rank, merge_->rank_count());
    ranks_[rank].follower = std::make_unique<FileFollower>(path, options_);
  }

  for (auto& [rank, r] : ranks_) {
    r.follower->poll();
    if (r.follower->restarts() == r.restarts_seen) continue;
    r.restarts_seen = r.follower->restarts();
    if (merge_ != nullptr) {
      // A rank file of a new run: what was merged belongs to the old one. Read every file anew.
      restart();
      return poll();
    }
  }

  if (merge_ == nullptr) {
    const int world_size = check_headers();  // 0 until some rank has its header
    if (world_size == 0) return 0;
    for (int k = 0; k < world_size; ++k)
      if (ranks_.count(k) == 0 || !ranks_[k].follower->has_header()) return 0;  // waits for every rank
    for (const auto& [rank, r] : ranks_) check_in_run(r.follower->path(), rank, world_size);
    start_merge();
  }
  return merge_new_events();
}

std::string DirectoryFollower::waiting_for() const {
  if (merge_ != nullptr) return "";
  if (ranks_.empty()) return fmt::format("rank-K.jsonl files in {}", dir_.string());
  int world_size = 0;
  int started = 0;
  for (const auto& [rank, r] : ranks_) {
    if (!r.follower->has_header()) continue;
    ++started;
    if (const std::optional<ProcessEntry> p =
            process_entry(r.follower->data().header, r.follower->path().string()))
      world_size = p->world_size;
  }
  if (world_size == 0) return fmt::format("the header lines of the rank files in {}", dir_.string());
  int missing = 0;
  while (ranks_.count(missing) > 0 && ranks_.at(missing).follower->has_header()) ++missing;
  return fmt::format("{} ({} of {} ranks have written their header)", rank_file_name(missing), started,
                     world_size);
}

}  // namespace dpscope::trace::detail
