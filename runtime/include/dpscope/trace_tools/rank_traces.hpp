// Traces of a run whose ranks are processes: DIR/rank-K.jsonl, one file per rank on the rank's own
// clock, each header's run object carrying a "process" entry (rank, world_size, clock_offset_ns,
// clock_uncertainty_ns; docs/trace-format.md), written by
//   mpirun -np N dpscope train --mode ddp --device cpu --backend mpi --trace DIR
// This file holds the rules that put the ranks on one timeline, shared by every reader of such a
// directory:
//   read_trace(DIR) (reader.hpp)       the ranks merged in memory: `dpscope trace stats|export DIR`,
//                                      lessons, `dpscope-viz DIR`
//   TraceFollower(DIR) (reader.hpp)    the same while the files grow: `dpscope-viz --follow DIR`
//   merge_rank_traces (trace/merge.hpp) the same written as one file: `dpscope trace merge DIR OUT`
// The rules (RankMerge):
//   - times: rank K's move by its clock_offset_ns, onto rank 0's clock;
//   - devices: renumbered rank after rank. A name without an index gets the rank ("cpu" on rank 1:
//     "cpu:1"); a name with one ("cuda:1", "sim:2") stays, unless a lower rank already has that
//     name, then the rank is added ("cuda:0 (rank 8)": two nodes that both have a cuda:0);
//   - a transfer's end with `src_rank`/`dst_rank` R is a device of rank R's header;
//   - flow ids: rank K's move to K * 2^40 + id, so two ranks' flows never meet;
//   - the run object, parameters and buckets are rank 0's; links are each rank's own, renumbered;
//   - events in time order (a stable sort: on equal times rank 0's first, then file order).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "dpscope/trace_format/schema.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace {

inline constexpr uint64_t kRankFlowStride = uint64_t{1} << 40;  // rank K's flow ids start at K * 2^40

// The "process" entry of a rank file's run object.
struct ProcessEntry {
  int rank = 0;
  int world_size = 1;
  int64_t clock_offset_ns = 0;       // add to this rank's times to get rank 0's clock
  int64_t clock_uncertainty_ns = 0;  // half the best ping-pong round trip
};

// "rank-3.jsonl" or "rank-3.jsonl.zst" (zstd-compressed, trace_tools/compressed.hpp) -> 3; nullopt
// for any other name.
std::optional<int> rank_of_file_name(std::string_view file_name);
std::string rank_file_name(int rank);  // "rank-3.jsonl"

// The rank-K.jsonl (or rank-K.jsonl.zst) files in `dir`, by rank; empty when it has none. Throws kIo
// when `dir` is not a directory that can be listed, kFormat when a rank has both files.
std::map<int, std::filesystem::path> list_rank_files(const std::filesystem::path& dir);
// The same, checked: at least one file, and none missing below the highest (kFormat).
std::map<int, std::filesystem::path> find_rank_files(const std::filesystem::path& dir);

// The "process" entry of a header's run object; nullopt when the run object has none. Throws
// kFormat, naming `path`, for an entry whose fields are missing or of the wrong type.
std::optional<ProcessEntry> process_entry(const TraceHeader& header, std::string_view path);
// The "process" entry of `data`, read from DIR/rank-`rank`.jsonl, checked: present, saying it is
// rank `rank`, below its world size. Throws kFormat, one line naming the file.
ProcessEntry rank_process_entry(const TraceData& data, int rank);
// Throws kFormat, naming both files, when `data`'s world size is not `world_size`, the one that
// `reference` (another rank's file) says.
void check_same_run(const TraceData& data, const ProcessEntry& process, const TraceData& reference,
                    int world_size);

// The name rank `rank`'s device `name` gets in the merged trace, given the names lower ranks'
// devices got (`taken`): "cpu" -> "cpu:1"; "cuda:1" stays; a taken "cuda:0" -> "cuda:0 (rank 8)".
std::string merged_device_name(std::string_view name, int rank, const std::unordered_set<std::string>& taken);

// The first line of the trace file at `path`, read alone (a rank file may be large). Throws like
// read_trace for a missing file, an empty one or a bad header.
TraceData read_trace_header(const std::filesystem::path& path);

// One merge of ranks 0..N-1: the merged header, and for each rank where its times, devices and flow
// ids go. Appending events (append_events) keeps per-rank string tables, so one RankMerge serves one
// merged TraceData, a poll at a time for a follower.
class RankMerge {
 public:
  // `ranks[k]`: rank k's header as read from DIR/rank-k.jsonl (TraceData::path names the file).
  // Throws kFormat, one line naming the file, for a header without its "process" entry, one that
  // says it is another rank, ranks that disagree on world_size, or fewer ranks than world_size.
  RankMerge(const std::filesystem::path& dir, const std::vector<const TraceData*>& ranks);

  int rank_count() const { return static_cast<int>(ranks_.size()); }
  const TraceHeader& header() const { return header_; }
  const std::string& version() const { return version_; }
  const std::vector<RankSource>& sources() const { return sources_; }

  int64_t time(int rank, int64_t ts_ns) const { return ts_ns + sources_[rank].clock_offset_ns; }
  uint64_t flow(int rank, uint64_t id) const { return id + static_cast<uint64_t>(rank) * kRankFlowStride; }
  // The merged id of rank `rank`'s device `id`; -1 when that rank's header has no such device.
  int32_t device(int rank, int32_t id) const;

  // An empty merged trace: the merged header, `dir` as its path, the rank sources.
  TraceData start(const std::filesystem::path& dir) const;
  // Appends rank `rank`'s events of `from` (parsed from its rank file, from its first event) to
  // `into`, moved onto the merged timeline: times, devices and flow ids mapped, strings and
  // payloads copied over. Returns the latest event start appended (rank 0's clock), or INT64_MIN.
  // A remote end (src_rank/dst_rank) naming a rank or device the run does not have is an error
  // "RANKFILE:LINE: reason" (kFormat) when `strict`, else a problem in `into` and an unknown end.
  int64_t append_events(TraceData& into, int rank, const TraceData& from, bool strict);
  // One event line of rank `rank`'s file rewritten for the merged file: `ts`, `dev`, `src`, `dst`
  // and `flow` mapped, `src_rank`/`dst_rank` dropped (resolved), every other field kept as it is.
  // `ts_ns` receives the merged time. Throws kFormat "RANKFILE:LINE: reason" for a line that is no
  // JSON object or names a device or rank the run does not have.
  std::string merged_line(int rank, std::string_view line, uint32_t line_no, int64_t& ts_ns) const;

 private:
  struct Rank {
    std::string path;
    std::vector<int32_t> device_ids;  // this rank's header id -> merged id (-1: none)
    std::vector<uint32_t> strings;    // this rank's string index -> merged (kNoString: not yet)
    std::vector<uint32_t> shapes;     // this rank's arg shape -> merged (UINT32_MAX: not yet)
  };
  // The merged id of the device `id` of rank `owner`, named in rank `rank`'s line `line`, or the
  // reason it has none.
  int32_t remote_device(int owner, int64_t id, std::string_view field, std::string& reason) const;

  std::vector<Rank> ranks_;
  std::vector<RankSource> sources_;
  TraceHeader header_;
  std::string version_;
};

// The rank-K.jsonl files of `dir` read and merged (RankMerge), in time order: what read_trace does
// with a directory. Each file is read with `options` (its problems keep its path in Problem::file).
// Throws kFormat for a directory without rank files or with one missing (a gap below the highest,
// or fewer than the run's world_size), and for the headers RankMerge refuses.
TraceData read_rank_directory(const std::filesystem::path& dir, ReadOptions options = {});

}  // namespace dpscope::trace
