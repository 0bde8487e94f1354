// DirectoryFollower: follows a directory of process ranks' growing rank-K.jsonl files (a
// multi-process run watched live) as one merged trace (internal to libdpscope; TraceFollower in
// reader.hpp is its face).
//
// Each rank file has its own FileFollower. Nothing is merged until every rank of the run
// (world_size, from the "process" entries) has written its header line: then RankMerge builds the
// merged header, and from then on each poll moves the ranks' new events into data() (a rank's
// events leave its follower once merged, so they are held once). data().ranks_written_until_ns is
// the live edge: the earliest of the ranks' latest event starts, on rank 0's clock. A rank file
// that is truncated or replaced (a new run) starts everything over.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "file_follower.hpp"

namespace dpscope::trace::detail {

class DirectoryFollower {
 public:
  DirectoryFollower(std::filesystem::path dir, ReadOptions options);
  // New events merged by this poll. A missing directory, missing rank files and rank files without
  // their header yet are waited for. Throws kFormat for a rank header RankMerge refuses (no
  // "process" entry, another run's world size, a rank beyond it), for a bad header line, and in
  // strict mode for a malformed event line.
  size_t poll();
  bool has_header() const { return merge_ != nullptr; }
  const TraceData& data() const { return data_; }
  TraceData& data() { return data_; }
  size_t restarts() const { return restarts_; }
  std::string waiting_for() const;

 private:
  struct Rank {
    std::unique_ptr<FileFollower> follower;
    size_t restarts_seen = 0;
    int64_t latest_ns = INT64_MIN;  // its latest event start merged so far, on rank 0's clock
  };
  // Checks the "process" entry of every rank header read so far; returns the world size once one
  // is known (0 before).
  int check_headers();
  void start_merge();
  size_t merge_new_events();
  void restart();

  std::filesystem::path dir_;
  ReadOptions options_;
  std::map<int, Rank> ranks_;  // by rank, as their files appeared
  std::unique_ptr<RankMerge> merge_;
  TraceData data_;
  size_t restarts_ = 0;
};

}  // namespace dpscope::trace::detail
