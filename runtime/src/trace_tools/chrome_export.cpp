// Chrome Trace Event JSON export (layout in dpscope/trace_tools/chrome_export.hpp).
//
// Two passes: the first lists every slice ("X") the export will draw and packs the slices of each
// (device, stream) into as few properly nested lanes as possible; the second writes the JSON in
// file order, in chunks, so a million events need no giant string.
#include "dpscope/trace_tools/chrome_export.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <ostream>
#include <set>
#include <streambuf>
#include <utility>
#include <vector>

#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/json_text.hpp"

namespace dpscope::trace {

namespace {

constexpr int64_t kReceiveSliceNs = 1;  // one integer ns: it can never partly overlap another slice

// ---- pass 1: slices and their lanes ----

struct Slice {
  int32_t pid = 0;
  int32_t tid = 0;  // base lane first, the packed lane after pack_lanes()
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

// One slice per span, two per transfer (send, receive), in event order.
std::vector<Slice> collect_slices(const TraceData& data) {
  std::vector<Slice> slices;
  slices.reserve(data.events.size());
  for (const Event& e : data.events) {
    const int tid = chrome_tid(e.stream);
    if (e.type == EventType::kSpan) {
      slices.push_back({chrome_pid(e.dev), tid, e.ts_ns, e.end_ns()});
    } else if (e.type == EventType::kTransfer) {
      // An end on another process's device (an unmerged rank file: -1) is drawn on the issuing device.
      const Transfer& t = data.transfer(e);
      slices.push_back({chrome_pid(t.src >= 0 ? t.src : e.dev), tid, e.ts_ns, e.end_ns()});
      slices.push_back(
          {chrome_pid(t.dst >= 0 ? t.dst : e.dev), tid, e.end_ns(), e.end_ns() + kReceiveSliceNs});
    }
  }
  return slices;
}

// Gives every slice a tid such that the slices of one (pid, tid) are disjoint or nested: slices are
// placed in order of start (longest first on ties) into the first lane whose open slice encloses
// them. A trace that follows the format's nesting rule keeps everything in lane 0.
void pack_lanes(std::vector<Slice>& slices) {
  std::vector<uint32_t> order(slices.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Slice& x = slices[a];
    const Slice& y = slices[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.begin_ns != y.begin_ns) return x.begin_ns < y.begin_ns;
    if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
    return a < b;
  });
  std::vector<std::vector<int64_t>> open_ends;  // per lane of the current (pid, tid): a stack of ends
  for (size_t i = 0; i < order.size(); ++i) {
    Slice& s = slices[order[i]];
    if (i == 0 || s.pid != slices[order[i - 1]].pid || s.tid != slices[order[i - 1]].tid) open_ends.clear();
    size_t lane = 0;
    for (; lane < open_ends.size(); ++lane) {
      std::vector<int64_t>& ends = open_ends[lane];
      while (!ends.empty() && ends.back() <= s.begin_ns) ends.pop_back();
      if (ends.empty() || ends.back() >= s.end_ns) break;
    }
    if (lane == open_ends.size()) open_ends.emplace_back();
    open_ends[lane].push_back(s.end_ns);
    s.tid += static_cast<int32_t>(lane) * kChromeExtraLaneTidStep;
  }
}

// ---- pass 2: JSON ----

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD. Strings from
// the reader are valid already (simdjson checks); a file path need not be.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    // RFC 3629: sequence length, and the allowed range of the second byte (no overlongs, no
    // surrogates, nothing past U+10FFFF).
    size_t len = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xbf;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = k == 1 ? (b >= lo && b <= hi) : (b & 0xc0) == 0x80;
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.append("\xef\xbf\xbd");  // U+FFFD
      ++i;
    }
  }
  return out;
}

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}
  ~JsonWriter() = default;
  fmt::memory_buffer& buf() { return buf_; }
  void raw(std::string_view s) { buf_.append(s); }
  void str(std::string_view s) { append_json_string(buf_, s); }
  void num(double v) { append_json_number(buf_, v); }
  void integer(int64_t v) { fmt::format_to(std::back_inserter(buf_), "{}", v); }
  // Nanoseconds as microseconds with up to 3 decimals: 4035 → 4.035, 3000 → 3, 1500 → 1.5.
  void micros(int64_t ns) {
    uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    if (ns < 0) buf_.push_back('-');
    fmt::format_to(std::back_inserter(buf_), "{}", magnitude / 1000);
    unsigned frac = static_cast<unsigned>(magnitude % 1000);
    if (frac == 0) return;
    int digits = 3;
    while (frac % 10 == 0) {
      frac /= 10;
      --digits;
    }
    fmt::format_to(std::back_inserter(buf_), ".{:0{}}", frac, digits);
  }
  // Starts the next element of traceEvents.
  void next_event() {
    if (buf_.size() > (1u << 20)) flush();
    raw(first_ ? "\n" : ",\n");
    first_ = false;
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  std::ostream& out_;
  fmt::memory_buffer buf_;
  bool first_ = true;
};

// Opens {"name":...,"ph":...,"pid":...,"tid":...,"ts":...; the caller adds the rest and the '}'.
void begin_event(JsonWriter& w, std::string_view name, const char* ph, int pid, int tid, int64_t ts_ns) {
  w.next_event();
  w.raw(R"({"name":)");
  w.str(name);
  fmt::format_to(std::back_inserter(w.buf()), R"(,"ph":"{}","pid":{},"tid":{},"ts":)", ph, pid, tid);
  w.micros(ts_ns);
}

// Metadata ("M") events carry no timestamp (Perfetto's advice: none rather than a made-up one).
void begin_metadata(JsonWriter& w, std::string_view name, int pid, int tid) {
  w.next_event();
  fmt::format_to(std::back_inserter(w.buf()), R"({{"name":"{}","ph":"M","pid":{},"tid":{})", name, pid, tid);
}

// ,"args":{"step":..,"phase":..,"rank":.. (left open for more args).
void begin_args(JsonWriter& w, const Event& e) {
  fmt::format_to(std::back_inserter(w.buf()), R"(,"args":{{"step":{},"phase":"{}","rank":{})", e.step,
                 to_string(e.phase), e.rank);
}

void numeric_args(JsonWriter& w, const TraceData& data, const Event& e) {
  if (e.payload < 0 || static_cast<size_t>(e.payload) >= data.args.size()) return;
  for (const auto& [key, value] : data.arg_values(data.args[e.payload])) {
    w.raw(",");
    w.str(data.str(key));
    w.raw(":");
    w.num(value);
  }
  if (e.type != EventType::kInstant) return;  // spans keep numbers only (their strings repeat the name)
  for (const auto& [key, text] : data.arg_texts(data.args[e.payload])) {  // an error's message
    w.raw(",");
    w.str(data.str(key));
    w.raw(":");
    w.str(data.str(text));
  }
}

std::string lane_name(int tid) {
  const int stream = (tid - 1) % kChromeExtraLaneTidStep;
  const int lane = (tid - 1) / kChromeExtraLaneTidStep;
  const char* base = stream < kStreamCount ? to_string(static_cast<StreamKind>(stream)) : "?";
  return lane == 0 ? std::string(base) : fmt::format("{} #{}", base, lane + 1);
}

void write_metadata(JsonWriter& w, const TraceData& data, const std::vector<Slice>& slices) {
  for (const TraceDeviceInfo& d : data.header.devices) {
    const int pid = chrome_pid(d.id);
    begin_metadata(w, "process_name", pid, 0);
    w.raw(R"(,"args":{"name":)");
    w.str(d.hardware.empty() ? d.name : fmt::format("{} \u00b7 {}", d.name, d.hardware));
    w.raw("}}");
    begin_metadata(w, "process_sort_index", pid, 0);
    fmt::format_to(std::back_inserter(w.buf()), R"(,"args":{{"sort_index":{}}}}})", d.id);
  }
  // Every lane that holds something; each device's compute lane also holds its instants.
  std::set<std::pair<int, int>> lanes;
  for (const Slice& s : slices) lanes.emplace(s.pid, s.tid);
  for (const Event& e : data.events) lanes.emplace(chrome_pid(e.dev), chrome_tid(StreamKind::kCompute));
  for (const auto& [pid, tid] : lanes) {
    begin_metadata(w, "thread_name", pid, tid);
    w.raw(R"(,"args":{"name":)");
    w.str(lane_name(tid));
    w.raw("}}");
    begin_metadata(w, "thread_sort_index", pid, tid);
    fmt::format_to(std::back_inserter(w.buf()), R"(,"args":{{"sort_index":{}}}}})", tid);
  }
}

void write_event(JsonWriter& w, const TraceData& data, const Event& e, const Slice*& next_slice) {
  auto out = std::back_inserter(w.buf());
  const int instant_tid = chrome_tid(StreamKind::kCompute);
  switch (e.type) {
    case EventType::kSpan: {
      const Slice& s = *next_slice++;
      begin_event(w, data.str(e.name), "X", s.pid, s.tid, e.ts_ns);
      w.raw(R"(,"dur":)");
      w.micros(e.dur_ns);
      w.raw(R"(,"cat":)");
      w.str(data.str(e.cat));
      begin_args(w, e);
      numeric_args(w, data, e);
      w.raw("}}");
      break;
    }
    case EventType::kTransfer: {
      const Slice& send = *next_slice++;
      const Slice& recv = *next_slice++;
      const Transfer& t = data.transfer(e);
      const std::string_view name = data.str(e.name);
      begin_event(w, name, "X", send.pid, send.tid, e.ts_ns);
      w.raw(R"(,"dur":)");
      w.micros(e.dur_ns);
      w.raw(R"(,"cat":"transfer")");
      begin_args(w, e);
      fmt::format_to(out, R"(,"src":{},"dst":{},"bytes":{},"flow":{})", t.src, t.dst, t.bytes, t.flow);
      if (t.coll >= 0) {
        fmt::format_to(out, R"(,"coll":{},"algo":)", t.coll);
        w.str(data.str(t.algo));
        fmt::format_to(out, R"(,"algo_step":{},"chunk":{})", t.algo_step, t.chunk);
      }
      w.raw("}}");
      begin_event(w, name, "s", send.pid, send.tid, e.ts_ns);
      fmt::format_to(out, R"(,"cat":"flow","id":{}}})", t.flow);
      begin_event(w, fmt::format("recv {}", name), "X", recv.pid, recv.tid, recv.begin_ns);
      w.raw(R"(,"dur":)");
      w.micros(kReceiveSliceNs);
      fmt::format_to(out, R"(,"cat":"transfer","args":{{"src":{},"bytes":{},"flow":{}}}}})", t.src, t.bytes,
                     t.flow);
      begin_event(w, name, "f", recv.pid, recv.tid, recv.begin_ns);
      fmt::format_to(out, R"(,"cat":"flow","id":{},"bp":"e"}})", t.flow);
      break;
    }
    case EventType::kCounter: {
      begin_event(w, data.str(e.name), "C", chrome_pid(e.dev), instant_tid, e.ts_ns);
      w.raw(R"(,"args":{)");
      bool first = true;
      for (const auto& [key, value] : data.counter_values(data.counters[e.payload])) {
        if (!std::isfinite(value)) continue;  // Chrome counters need numbers
        if (!first) w.raw(",");
        first = false;
        w.str(data.str(key));
        w.raw(":");
        w.num(value);
      }
      w.raw("}}");
      break;
    }
    case EventType::kInstant: {
      begin_event(w, data.str(e.name), "i", chrome_pid(e.dev), instant_tid, e.ts_ns);
      w.raw(R"(,"s":"t")");
      begin_args(w, e);
      numeric_args(w, data, e);
      w.raw("}}");
      break;
    }
    case EventType::kValues: {
      const ValueSample& v = data.values[e.payload];
      begin_event(w, fmt::format("{}[{}] {}", data.str(e.name), v.param, data.str(v.when)), "i",
                  chrome_pid(e.dev), instant_tid, e.ts_ns);
      w.raw(R"(,"s":"t","cat":"values")");
      begin_args(w, e);
      fmt::format_to(out, R"(,"param":{},"when":)", v.param);
      w.str(data.str(v.when));
      w.raw(R"(,"values":[)");
      for (size_t i = 0; i < v.values.size(); ++i) {
        if (i) w.raw(",");
        w.num(v.values[i]);
      }
      w.raw(R"(],"norm":)");
      w.num(v.norm);
      if (v.stride > 1) fmt::format_to(out, R"(,"stride":{})", v.stride);
      w.raw("}}");
      break;
    }
    case EventType::kSamples: {
      const SampleIndices& s = data.samples[e.payload];
      begin_event(w, "samples", "i", chrome_pid(e.dev), instant_tid, e.ts_ns);
      w.raw(R"(,"s":"t","cat":"samples")");
      begin_args(w, e);
      fmt::format_to(out, R"(,"count":{},"indices":[{}])", s.indices.size(), fmt::join(s.indices, ","));
      if (s.epoch) fmt::format_to(out, R"(,"epoch":{})", *s.epoch);
      w.raw("}}");
      break;
    }
    case EventType::kBuckets: {
      const BucketAssignment& b = data.buckets[e.payload];
      begin_event(w, fmt::format("buckets ({})", data.str(b.reason)), "i", chrome_pid(e.dev), instant_tid,
                  e.ts_ns);
      w.raw(R"(,"s":"t","cat":"buckets")");
      begin_args(w, e);
      w.raw(R"(,"reason":)");
      w.str(data.str(b.reason));
      w.raw(R"(,"buckets":[)");
      for (size_t i = 0; i < b.buckets.size(); ++i) {
        fmt::format_to(out, R"({}{{"id":{},"params":[{}],"bytes":{}}})", i ? "," : "", b.buckets[i].id,
                       fmt::join(b.buckets[i].params, ","), b.buckets[i].bytes);
      }
      w.raw("]}}");
      break;
    }
  }
}

}  // namespace

void export_chrome(const TraceData& data, std::ostream& out) {
  std::vector<Slice> slices = collect_slices(data);
  pack_lanes(slices);

  JsonWriter w(out);
  w.raw(R"({"displayTimeUnit":"ns","otherData":{"generator":"dpscope","format":)");
  w.str(kTraceFormatName);
  w.raw(R"(,"version":)");
  w.str(data.version);
  w.raw(R"(,"clock":)");
  w.str(data.header.clock);
  w.raw(R"(,"trace":)");
  w.str(valid_utf8(data.path));
  w.raw(R"(,"run":)");
  // run_json is a JSON object (the reader re-serialises what it parsed); anything else is quoted.
  const std::string& run = data.header.run_json;
  if (!run.empty() && run.front() == '{' && run.back() == '}') {
    w.raw(run);
  } else {
    w.str(run);
  }
  w.raw(R"(},"traceEvents":[)");
  write_metadata(w, data, slices);
  const Slice* next_slice = slices.data();
  for (const Event& e : data.events) write_event(w, data, e, next_slice);
  w.raw("\n]}\n");
  w.flush();
  out.flush();
  DPS_CHECK(out.good(), ErrorKind::kIo, "cannot write the Chrome trace of '{}': the output stream failed",
            data.path);
}

namespace {

// An ostream's bytes into an AtomicFileWriter in 64 KiB blocks. A failed write (a full disk) is kept
// with its reason and rethrown once the stream is done, since ostreams swallow exceptions.
class AtomicFileBuf final : public std::streambuf {
 public:
  explicit AtomicFileBuf(AtomicFileWriter& file) : file_(file), buffer_(64 * 1024) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  // Throws the first write failure, after everything buffered was tried.
  void finish() {
    sync();
    if (failure_) std::rethrow_exception(failure_);
  }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override {
    const std::ptrdiff_t n = pptr() - pbase();
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    if (failure_) return -1;
    try {
      file_.write(buffer_.data(), static_cast<uint64_t>(n));
    } catch (...) {
      failure_ = std::current_exception();
      return -1;
    }
    return 0;
  }

 private:
  AtomicFileWriter& file_;
  std::vector<char> buffer_;
  std::exception_ptr failure_;
};

}  // namespace

void export_chrome(const TraceData& data, const std::filesystem::path& path) {
  AtomicFileWriter file(path);  // a new file renamed into place, or a device written in place
  AtomicFileBuf buffer(file);
  std::ostream out(&buffer);
  try {
    export_chrome(data, out);
  } catch (const Error&) {
    buffer.finish();  // a failed write is the reason the stream failed: say that instead
    throw;
  }
  buffer.finish();
  file.commit();
}

}  // namespace dpscope::trace
