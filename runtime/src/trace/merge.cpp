// merge_rank_traces() (trace/merge.hpp): RankMerge's rules (trace_tools/rank_traces.hpp) applied
// line by line, so every field of every event is kept as its rank wrote it.
#include "dpscope/trace/merge.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"

namespace dpscope::trace {

namespace fs = std::filesystem;

MergeResult merge_rank_traces(const fs::path& dir, const fs::path& out) {
  const std::map<int, fs::path> files = find_rank_files(dir);
  OutputGuard guard;  // OUT is neither DIR, nor a rank file in it, nor a FIFO or a directory
  guard.add_input_dir("DIR", dir, [](std::string_view name) { return rank_of_file_name(name).has_value(); });
  for (const auto& [rank, file] : files) guard.add_input(fmt::format("rank {}'s trace", rank), file);
  guard.add_output("OUT", out);
  guard.check();
  // Every rank file is read whole first: a malformed line anywhere stops the merge before OUT is
  // touched, and the headers are all known before any line names another rank's device.
  std::vector<TraceData> headers;
  std::vector<fs::path> partial;
  for (const auto& [rank, file] : files) {
    const TraceData data = read_trace(file);
    if (data.partial_last_line) partial.push_back(file);
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

  // Written to a temporary file renamed over OUT at the end (or in place to a device such as
  // /dev/stdout): a failure leaves OUT as it was and no temporary file behind.
  AtomicFileWriter target(out);
  TraceFileWriter file(target.in_place() ? out : target.temp_path(), names_zstd_file(out));
  fmt::memory_buffer header;
  append_trace_header(header, merge.header());  // ends with its '\n'
  file.write(std::string_view(header.data(), header.size()));
  for (const auto& [ts, line] : events) {
    file.write(line);
    file.write("\n");
  }
  file.close();
  target.commit();
  return {.ranks = merge.rank_count(),
          .events = events.size(),
          .clocks = merge.sources(),
          .partial = std::move(partial)};
}

}  // namespace dpscope::trace
