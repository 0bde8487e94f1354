// merge_rank_traces() (trace/merge.hpp): RankMerge's rules (trace_format/rank_traces.hpp) applied
// line by line, so every field of every event is kept as its rank wrote it.
#include "dpscope/trace/merge.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "dpscope/base/error.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_format/compressed.hpp"
#include "dpscope/trace_format/rank_traces.hpp"

namespace dpscope::trace {

namespace fs = std::filesystem;

MergeResult merge_rank_traces(const fs::path& dir, const fs::path& out) {
  const std::map<int, fs::path> files = find_rank_files(dir);
  for (const auto& [rank, file] : files) {
    std::error_code ec;
    DPS_CHECK(!(fs::exists(out, ec) && fs::equivalent(out, file, ec)), ErrorKind::kUsage,
              "trace merge: OUT '{}' is rank {}'s trace; refusing to overwrite it", out.string(), rank);
  }
  // Every rank file is read whole first: a malformed line anywhere stops the merge before OUT is
  // touched, and the headers are all known before any line names another rank's device.
  std::vector<TraceData> headers;
  for (const auto& [rank, file] : files) {
    const TraceData data = read_trace(file);
    TraceData header;
    header.path = data.path;
    header.version = data.version;
    header.header = data.header;
    headers.push_back(std::move(header));
  }
  std::vector<const TraceData*> header_ptrs;
  for (const TraceData& h : headers) header_ptrs.push_back(&h);
  const RankMerge merge(dir, header_ptrs);

  std::vector<std::pair<int64_t, std::string>> events;  // (time on rank 0's clock, line)
  for (const auto& [rank, file] : files) {
    const std::string text = read_trace_text(file).text;  // decoded when compressed (read above whole)
    size_t begin = text.find('\n');                       // after the header, read above
    uint32_t line_no = 1;
    while (begin != std::string::npos && begin + 1 < text.size()) {
      ++begin;
      const size_t end = text.find('\n', begin);
      if (end == std::string::npos) break;  // a partial last line (the rank was still writing): left out
      const std::string line = text.substr(begin, end - begin);
      begin = end;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      int64_t ts_ns = 0;
      std::string merged = merge.merged_line(rank, line, line_no, ts_ns);
      events.emplace_back(ts_ns, std::move(merged));
    }
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  const fs::path temp = out.string() + ".tmp";
  {
    std::unique_ptr<TraceFileWriter> file;  // OUT ending in .zst: written zstd-compressed
    try {
      file = std::make_unique<TraceFileWriter>(temp, names_zstd_file(out));
    } catch (const Error&) {
      throw Error(ErrorKind::kIo, fmt::format("trace merge: cannot write '{}'", temp.string()));
    }
    fmt::memory_buffer header;
    append_trace_header(header, merge.header());  // ends with its '\n'
    file->write(std::string_view(header.data(), header.size()));
    for (const auto& [ts, line] : events) {
      file->write(line);
      file->write("\n");
    }
    try {
      file->close();
    } catch (const Error&) {
      throw Error(ErrorKind::kIo, fmt::format("trace merge: writing '{}' failed", temp.string()));
    }
  }
  std::error_code ec;
  fs::rename(temp, out, ec);
  DPS_CHECK(!ec, ErrorKind::kIo, "trace merge: cannot move '{}' to '{}': {}", temp.string(), out.string(),
            ec.message());
  return {.ranks = merge.rank_count(), .events = events.size(), .clocks = merge.sources()};
}

}  // namespace dpscope::trace
