// Process ranks' traces on one timeline (rank_traces.hpp): the rank files of a directory, their
// "process" entries, RankMerge (the merged header and the mapping of times, devices and flows,
// applied to parsed events and to lines) and read_rank_directory.
// Sections: rank files · process entries · device names · RankMerge · events · lines · directories.
#include "dpscope/trace_tools/rank_traces.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <span>

#include <fmt/ranges.h>
#include <simdjson.h>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/json_text.hpp"
#include "event_copy.hpp"
#include "posix_file.hpp"
#include "reserve.hpp"
#include "text_buffer.hpp"
#include "text_pieces.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace {

namespace fs = std::filesystem;
namespace dom = simdjson::dom;

// ---- rank files ----

std::optional<int> rank_of_file_name(std::string_view file_name) {
  constexpr std::string_view kPrefix = "rank-";
  constexpr std::string_view kSuffix = ".jsonl";
  constexpr std::string_view kCompressed = ".zst";  // rank-K.jsonl.zst (compressed.hpp)
  if (file_name.ends_with(kCompressed)) file_name.remove_suffix(kCompressed.size());
  if (file_name.size() <= kPrefix.size() + kSuffix.size() || !file_name.starts_with(kPrefix) ||
      !file_name.ends_with(kSuffix))
    return std::nullopt;
  const std::string_view digits =
      file_name.substr(kPrefix.size(), file_name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;  // "rank--1"
  int rank = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return rank;
}

std::string rank_file_name(int rank) { return fmt::format("rank-{}.jsonl", rank); }

std::map<int, fs::path> list_rank_files(const fs::path& dir) {
  std::error_code ec;
  DPS_CHECK(fs::exists(dir, ec), ErrorKind::kIo, "'{}' does not exist", dir.string());
  DPS_CHECK(fs::is_directory(dir, ec), ErrorKind::kIo, "'{}' is not a directory", dir.string());
  std::map<int, fs::path> files;
  fs::directory_iterator it(dir, ec);
  DPS_CHECK(!ec, ErrorKind::kIo, "cannot list '{}': {}", dir.string(), ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (const std::optional<int> rank = rank_of_file_name(it->path().filename().string())) {
      const auto [known, added] = files.emplace(*rank, it->path());
      DPS_CHECK(added, ErrorKind::kFormat, "'{}' has both {} and {}: which is rank {}'s trace?", dir.string(),
                std::min(known->second.filename(), it->path().filename()).string(),
                std::max(known->second.filename(), it->path().filename()).string(), *rank);
    }
  }
  DPS_CHECK(!ec, ErrorKind::kIo, "cannot list '{}': {}", dir.string(), ec.message());
  return files;
}

std::map<int, fs::path> find_rank_files(const fs::path& dir) {
  std::map<int, fs::path> files = list_rank_files(dir);
  DPS_CHECK(!files.empty(), ErrorKind::kFormat,
            "'{}' has no rank-K.jsonl files (the per-rank traces of mpirun -np N dpscope train --backend mpi "
            "--trace DIR)",
            dir.string());
  const int highest = files.rbegin()->first;
  for (int k = 0; k < highest; ++k)
    DPS_CHECK(files.count(k) > 0, ErrorKind::kFormat, "'{}' has {} but no {}", dir.string(),
              rank_file_name(highest), rank_file_name(k));
  // A rank "file" that is a directory, a FIFO or a dangling link is named for what it is here, before
  // a reader takes a directory for another rank directory ("'DIR/rank-2.jsonl' has no rank-K.jsonl").
  for (const auto& [rank, file] : files)
    if (const std::string why = why_not_readable(file); !why.empty())
      throw Error(ErrorKind::kIo, fmt::format("cannot read trace '{}': {}", file.string(), why));
  return files;
}

// ---- process entries ----

std::optional<ProcessEntry> process_entry(const TraceHeader& header, std::string_view path) {
  dom::parser parser;
  dom::element run;
  if (parser.parse(header.run_json).get(run)) return std::nullopt;  // the reader checked it is an object
  dom::element process;
  if (run["process"].get(process)) return std::nullopt;
  dom::object entry;
  DPS_CHECK(!process.get_object().get(entry), ErrorKind::kFormat,
            "{}: header field 'run.process' must be an object", path);
  auto integer = [&](std::string_view key, int64_t lo, int64_t hi) {
    int64_t v = 0;
    DPS_CHECK(!entry[key].get_int64().get(v) && v >= lo && v <= hi, ErrorKind::kFormat,
              "{}: header field 'run.process.{}' must be an integer from {} to {}", path, key, lo, hi);
    return v;
  };
  constexpr int64_t kMaxRanks = 999999;  // what rank-K.jsonl names hold
  ProcessEntry p;
  p.rank = static_cast<int>(integer("rank", 0, kMaxRanks));
  p.world_size = static_cast<int>(integer("world_size", 1, kMaxRanks + 1));
  // Offsets stay far inside the format's time range (2^62 ns), so shifted times never overflow.
  constexpr int64_t kMaxOffsetNs = int64_t{1} << 60;
  p.clock_offset_ns = integer("clock_offset_ns", -kMaxOffsetNs, kMaxOffsetNs);
  p.clock_uncertainty_ns = integer("clock_uncertainty_ns", 0, kMaxOffsetNs);
  return p;
}

ProcessEntry rank_process_entry(const TraceData& data, int rank) {
  const std::optional<ProcessEntry> process = process_entry(data.header, data.path);
  DPS_CHECK(process.has_value(), ErrorKind::kFormat,
            "{}: its header has no \"process\" entry (rank, world_size, clock offset), so it is no process "
            "rank's trace (train --backend mpi --trace DIR writes them)",
            data.path);
  DPS_CHECK(process->rank == rank, ErrorKind::kFormat, "{}: its header says it is rank {}, its name rank {}",
            data.path, process->rank, rank);
  DPS_CHECK(rank < process->world_size, ErrorKind::kFormat,
            "{}: its header says it is rank {} of a run of {} ranks (world_size)", data.path, rank,
            process->world_size);
  return *process;
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The devices a rank trains on, as "kind hardware" (host entries left out: a rank's host lane
// appears only once it emits on it): one run's ranks all name the same.
std::vector<std::string> device_kinds(const TraceHeader& header) {
  std::vector<std::string> kinds;
  for (const TraceDeviceInfo& d : header.devices)
    if (d.id != header.host_id && d.kind != "host")
      kinds.push_back(d.hardware.empty() ? d.kind : d.kind + " " + d.hardware);
  return kinds;
}

}  // namespace

void check_same_run(const TraceData& data, const ProcessEntry& process, const TraceData& reference,
                    int world_size) {
  const auto not_one_run = [&](const std::string& what, const std::string& here, const std::string& there) {
    return Error(ErrorKind::kFormat,
                 fmt::format("{}: its header says {} {}, but {} says {}: the rank files are "
                             "not of one run",
                             data.path, what, here, reference.path, there));
  };
  if (process.world_size != world_size)
    throw not_one_run("world_size", std::to_string(process.world_size), std::to_string(world_size));
  if (data.header.clock != reference.header.clock)
    throw not_one_run("clock", data.header.clock, reference.header.clock);
  const std::vector<TraceParamInfo>& params = data.header.params;
  const std::vector<TraceParamInfo>& ref_params = reference.header.params;
  if (params.size() != ref_params.size())
    throw not_one_run("parameter count", std::to_string(params.size()), std::to_string(ref_params.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    const TraceParamInfo& p = params[i];
    const TraceParamInfo& q = ref_params[i];
    if (p.name != q.name || p.shape != q.shape)
      throw not_one_run(fmt::format("parameter {}", i), fmt::format("'{}' {}", p.name, shape_text(p.shape)),
                        fmt::format("'{}' {}", q.name, shape_text(q.shape)));
  }
  const std::vector<std::string> kinds = device_kinds(data.header);
  const std::vector<std::string> ref_kinds = device_kinds(reference.header);
  if (kinds != ref_kinds)
    throw not_one_run("devices", fmt::format("[{}]", fmt::join(kinds, ", ")),
                      fmt::format("[{}]", fmt::join(ref_kinds, ", ")));
}

// ---- device names ----

namespace {

// "cuda:1", "sim:2", "pcie switch 0": the name ends in a number after ':' or ' '.
bool has_index(std::string_view name) {
  size_t digits = 0;
  while (digits < name.size() && name[name.size() - 1 - digits] >= '0' &&
         name[name.size() - 1 - digits] <= '9')
    ++digits;
  if (digits == 0 || digits == name.size()) return false;
  const char before = name[name.size() - 1 - digits];
  return before == ':' || before == ' ';
}

}  // namespace

std::string merged_device_name(std::string_view name, int rank,
                               const std::unordered_set<std::string>& taken) {
  std::string merged = has_index(name) ? std::string(name) : fmt::format("{}:{}", name, rank);
  if (taken.count(merged) > 0) merged = fmt::format("{} (rank {})", name, rank);
  return merged;
}

TraceData read_trace_header(const fs::path& path) {
  const detail::FileDescriptor file{detail::open_trace_file(path.string())};
  detail::TextBuffer head;
  constexpr uint64_t kChunk = 1 << 16;
  std::unique_ptr<ZstdDecoder> decoder;  // a compressed file (by content): its head is decoded
  uint64_t offset = 0;
  // Only the new text is searched for the '\n': searched from the start each time, a rank file of
  // 1 GiB without one took minutes (quadratic) before `trace stats DIR` said so.
  size_t searched = 0;
  size_t newline = std::string_view::npos;
  auto find_newline = [&] {
    newline = head.view().find('\n', searched);
    searched = head.size();
    if (newline == std::string_view::npos) detail::check_line_length(path.string(), 1, head.size());
    return newline != std::string_view::npos;
  };
  for (;;) {
    const std::string more = detail::read_at(file.fd, offset, kChunk, path.string());
    offset += more.size();
    if (offset == more.size() && starts_with_zstd_magic(more))
      decoder = std::make_unique<ZstdDecoder>(path.string());
    if (decoder != nullptr) {
      // In bounded steps: 64 KiB of a zstd bomb decoded whole took 2 GB before the '\n' was looked for.
      size_t consumed = 0;
      while (decoder->decode_some(more, &consumed, head, kChunk * 16) && !find_newline()) {
      }
    } else {
      std::memcpy(head.room(more.size()), more.data(), more.size());
      head.grow(more.size());
    }
    if (newline != std::string_view::npos || find_newline()) break;
    if (more.size() < kChunk) {  // the file ends before its first '\n': parse_trace says so
      DPS_CHECK(decoder == nullptr || decoder->at_frame_end() || !head.empty(), ErrorKind::kFormat, "{}",
                cut_off_message(path.string()));
      break;
    }
  }
  const std::string_view text = head.view();
  return parse_trace(newline == std::string_view::npos ? text : text.substr(0, newline + 1), path.string());
}

// ---- RankMerge ----

RankMerge::RankMerge(const fs::path& dir, const std::vector<const TraceData*>& ranks) {
  DPS_ASSERT(!ranks.empty(), "RankMerge needs rank 0's header at least");
  std::unordered_set<std::string> taken;
  int world_size = 0;
  for (size_t k = 0; k < ranks.size(); ++k) {
    const TraceData& data = *ranks[k];
    const int rank = static_cast<int>(k);
    const ProcessEntry process = rank_process_entry(data, rank);
    if (rank == 0) world_size = process.world_size;
    check_same_run(data, process, *ranks[0], world_size);
    sources_.push_back({.rank = rank,
                        .path = data.path,
                        .clock_offset_ns = process.clock_offset_ns,
                        .clock_uncertainty_ns = process.clock_uncertainty_ns});
    Rank r;
    r.path = data.path;
    for (const TraceDeviceInfo& d : data.header.devices) {
      TraceDeviceInfo merged = d;
      merged.id = static_cast<int>(header_.devices.size());
      merged.name = merged_device_name(d.name, rank, taken);
      taken.insert(merged.name);
      if (static_cast<size_t>(d.id) >= r.device_ids.size())
        r.device_ids.resize(static_cast<size_t>(d.id) + 1, -1);
      r.device_ids[static_cast<size_t>(d.id)] = merged.id;
      header_.devices.push_back(std::move(merged));
    }
    for (const TraceLinkInfo& l : data.header.links) {
      TraceLinkInfo merged = l;
      const auto id = [&](int local) {
        return local >= 0 && static_cast<size_t>(local) < r.device_ids.size() ? r.device_ids[local] : -1;
      };
      merged.src = id(l.src);
      merged.dst = id(l.dst);
      if (merged.src >= 0 && merged.dst >= 0) header_.links.push_back(merged);
    }
    if (rank == 0) {
      header_.clock = data.header.clock;
      header_.run_json = data.header.run_json;
      header_.params = data.header.params;
      header_.buckets = data.header.buckets;
      version_ = data.version;
    }
    ranks_.push_back(std::move(r));
  }
  const int present = static_cast<int>(ranks.size());
  DPS_CHECK(
      present == world_size, ErrorKind::kFormat,
      "'{}' has {}, but the run had {} ranks (world_size in its headers): {} is missing", dir.string(),
      present == 1 ? "only rank-0.jsonl" : fmt::format("rank-0.jsonl to {}", rank_file_name(present - 1)),
      world_size, rank_file_name(present));
}

int32_t RankMerge::device(int rank, int32_t id) const {
  if (rank < 0 || rank >= rank_count() || id < 0) return -1;
  const std::vector<int32_t>& ids = ranks_[static_cast<size_t>(rank)].device_ids;
  return static_cast<size_t>(id) < ids.size() ? ids[static_cast<size_t>(id)] : -1;
}

int32_t RankMerge::remote_device(int owner, int64_t id, std::string_view field, std::string& reason) const {
  if (owner < 0 || owner >= rank_count()) {
    reason =
        fmt::format("field '{}_rank' is {}, but the run has ranks 0 to {}", field, owner, rank_count() - 1);
    return -1;
  }
  const int32_t merged =
      id < 0 || id > std::numeric_limits<int32_t>::max() ? -1 : device(owner, static_cast<int32_t>(id));
  if (merged < 0)
    reason = fmt::format("field '{}' is {}, which is not a device in rank {}'s header ({})", field, id, owner,
                         rank_file_name(owner));
  return merged;
}

TraceData RankMerge::start(const fs::path& dir) const {
  TraceData data;
  data.path = dir.string();
  data.version = version_;
  data.header = header_;
  data.ranks = sources_;
  return data;
}

// ---- events ----

namespace {

// Times stay in the format's range [-2^62, 2^62) once moved (docs/trace-format.md), so differences
// of merged times fit in int64 as they do in one file. "" when they do.
std::string out_of_range(int64_t ts_ns, int64_t dur_ns, int64_t offset_ns) {
  constexpr int64_t kTimeLimitNs = int64_t{1} << 62;
  if (ts_ns >= -kTimeLimitNs && ts_ns <= (kTimeLimitNs - 1) - std::max<int64_t>(dur_ns, 0)) return "";
  return fmt::format(
      "field 'ts' is {} on rank 0's clock (moved by the rank's clock offset, {} ns), outside the "
      "supported range [-{}, {}) ns",
      ts_ns, offset_ns, kTimeLimitNs, kTimeLimitNs);
}

}  // namespace

int64_t RankMerge::append_events(TraceData& into, int rank, const TraceData& from, bool strict) {
  Rank& r = ranks_[static_cast<size_t>(rank)];
  detail::CopyMaps maps{r.strings, r.shapes};
  int64_t latest = INT64_MIN;
  for (const Event& source : from.events) {
    Event e = source;
    e.ts_ns = time(rank, source.ts_ns);
    if (std::string reason = out_of_range(e.ts_ns, e.dur_ns, sources_[rank].clock_offset_ns);
        !reason.empty()) {
      DPS_CHECK(!strict, ErrorKind::kFormat, "{}:{}: {}", r.path, source.line, reason);
      into.problems.push_back({source.line, std::move(reason), r.path});
      continue;
    }
    e = detail::copy_event(into, from, e, maps, /*keep_remote_ends=*/false);
    e.dev = device(rank, source.dev);
    if (e.type == EventType::kTransfer && e.payload >= 0) {
      Transfer& t = into.transfers[static_cast<size_t>(e.payload)];
      t.src = device(rank, t.src);
      t.dst = device(rank, t.dst);
      t.flow = flow(rank, t.flow);
      // A merged trace has no remote ends: each is resolved to its merged device here.
      if (const RemoteEnds* remote = from.remote_ends_of(source)) {
        std::string reason;
        if (remote->src_rank >= 0) t.src = remote_device(remote->src_rank, remote->src, "src", reason);
        if (remote->dst_rank >= 0 && reason.empty())
          t.dst = remote_device(remote->dst_rank, remote->dst, "dst", reason);
        if (!reason.empty()) {
          DPS_CHECK(!strict, ErrorKind::kFormat, "{}:{}: {}", r.path, source.line, reason);
          into.problems.push_back({source.line, std::move(reason), r.path});
        }
      }
    }
    latest = std::max(latest, e.ts_ns);
    detail::TraceParser::append(into, e);
  }
  for (const Problem& p : from.problems)
    into.problems.push_back({p.line, p.reason, p.file.empty() ? r.path : p.file});
  return latest;
}

// ---- lines ----

std::string RankMerge::merged_line(int rank, std::string_view line, uint32_t line_no, int64_t& ts_ns) const {
  const std::string& path = ranks_[static_cast<size_t>(rank)].path;
  auto fail = [&](const std::string& reason) {
    return Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", path, line_no, reason));
  };
  thread_local dom::parser parser;
  dom::element root;
  dom::object event;
  if (parser.parse(line.data(), line.size()).get(root) || root.get_object().get(event))
    throw fail("not a JSON object");
  // The ranks whose headers `src` and `dst` name (this rank's unless the line says otherwise).
  int64_t src_rank = rank;
  int64_t dst_rank = rank;
  for (dom::key_value_pair kv : event) {
    if (kv.key == "src_rank" && kv.value.get_int64().get(src_rank))
      throw fail("field 'src_rank' must be an integer");
    if (kv.key == "dst_rank" && kv.value.get_int64().get(dst_rank))
      throw fail("field 'dst_rank' must be an integer");
  }
  fmt::memory_buffer out;
  out.push_back('{');
  bool first = true;
  ts_ns = 0;
  for (dom::key_value_pair kv : event) {
    if (kv.key == "src_rank" || kv.key == "dst_rank") continue;  // resolved below: merged ids
    if (!first) out.push_back(',');
    first = false;
    append_json_string(out, kv.key);
    out.push_back(':');
    int64_t value = 0;
    const bool integer = !kv.value.get_int64().get(value);
    if (integer && kv.key == "ts") {
      ts_ns = time(rank, value);
      int64_t dur_ns = 0;
      if (event["dur"].get_int64().get(dur_ns)) dur_ns = 0;  // no `dur`: an instant
      if (std::string reason = out_of_range(ts_ns, dur_ns, sources_[rank].clock_offset_ns); !reason.empty())
        throw fail(reason);
      fmt::format_to(std::back_inserter(out), "{}", ts_ns);
    } else if (integer && (kv.key == "dev" || kv.key == "src" || kv.key == "dst")) {
      const int64_t owner = kv.key == "src" ? src_rank : kv.key == "dst" ? dst_rank : rank;
      std::string reason;
      const int32_t merged =
          remote_device(static_cast<int>(std::clamp<int64_t>(owner, -1, INT32_MAX)), value, kv.key, reason);
      if (merged < 0) throw fail(reason);
      fmt::format_to(std::back_inserter(out), "{}", merged);
    } else if (integer && kv.key == "flow" && value >= 0) {
      fmt::format_to(std::back_inserter(out), "{}", flow(rank, static_cast<uint64_t>(value)));
    } else {
      const std::string text = simdjson::minify(kv.value);
      out.append(text.data(), text.data() + text.size());
    }
  }
  out.push_back('}');
  return fmt::to_string(out);
}

// ---- directories ----

TraceData read_rank_directory(const fs::path& dir, ReadOptions options) {
  const std::map<int, fs::path> files = find_rank_files(dir);
  // Every header first (a transfer of rank 0 may name a device of the last rank), then each rank's
  // events, one file in memory at a time besides the merged trace.
  std::vector<TraceData> headers;
  for (const auto& [rank, file] : files) headers.push_back(read_trace_header(file));
  std::vector<const TraceData*> header_ptrs;
  for (const TraceData& h : headers) header_ptrs.push_back(&h);
  RankMerge merge(dir, header_ptrs);
  TraceData merged = merge.start(dir);
  size_t events = 0;
  for (const auto& [rank, file] : files) {
    std::error_code ec;
    const uintmax_t bytes = fs::file_size(file, ec);
    if (!ec) events += detail::estimated_events(bytes, file.extension() == ".zst");
  }
  detail::reserve_events(merged, events);
  for (const auto& [rank, file] : files) {
    const TraceData data = read_trace_file(file, options);
    merge.append_events(merged, rank, data, options.strict);
    merged.partial_last_line = merged.partial_last_line || data.partial_last_line;
    merged.ranks[static_cast<size_t>(rank)].partial_last_line = data.partial_last_line;
    merged.ranks[static_cast<size_t>(rank)].partial_line = data.partial_line;
  }
  // Time order, stable (rank order, then file order, on equal times), as `dpscope trace merge` writes.
  std::vector<std::pair<int64_t, uint32_t>> keyed(merged.events.size());
  for (size_t i = 0; i < keyed.size(); ++i) keyed[i] = {merged.events[i].ts_ns, static_cast<uint32_t>(i)};
  if (!std::is_sorted(keyed.begin(), keyed.end())) {
    std::sort(keyed.begin(), keyed.end());
    // Moved into place cycle by cycle (position p takes event keyed[p].second), so no second copy
    // of the events is ever held.
    constexpr uint32_t kPlaced = std::numeric_limits<uint32_t>::max();
    for (size_t start = 0; start < keyed.size(); ++start) {
      if (keyed[start].second == kPlaced) continue;
      const Event first = merged.events[start];
      size_t at = start;
      for (;;) {
        const uint32_t from = keyed[at].second;
        keyed[at].second = kPlaced;
        if (from == start) {
          merged.events[at] = first;
          break;
        }
        merged.events[at] = merged.events[from];
        at = from;
      }
    }
  }
  return merged;
}

}  // namespace dpscope::trace
