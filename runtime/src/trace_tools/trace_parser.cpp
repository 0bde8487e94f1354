// TraceParser: dpscope trace lines (docs/trace-format.md) → TraceData, with simdjson.
//
// Each line is parsed with a reused simdjson DOM parser (it copies the line into its own padded
// buffer, so lines need no padding), then the object's fields are sorted into slots by key in one
// pass and checked in a fixed order, so the reported reason does not depend on field order.
// Sections: value helpers · the header · events · the line loop.
#include "trace_parser.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "dpscope/base/error.hpp"

namespace dpscope::trace::detail {

namespace dom = simdjson::dom;

namespace {

// Why one line was rejected; caught by the line loop, which reports it with the line number.
struct LineError {
  std::string reason;
};
[[noreturn]] void fail(std::string reason) { throw LineError{std::move(reason)}; }

// Why a line is not JSON the reader takes: a valid line that is nested too deeply or holds a
// number past 64 bits is named as such, not as "not valid JSON".
std::string json_error_reason(simdjson::error_code error) {
  switch (error) {
    case simdjson::DEPTH_ERROR: return "JSON nested too deeply (a trace line has at most a few levels)";
    case simdjson::NUMBER_ERROR:
      return "a number that is not valid JSON or does not fit in 64 bits (trace integers are 64-bit at most)";
    case simdjson::CAPACITY: return "a line too long to parse";
    default: return "not valid JSON";
  }
}

// ---- value helpers: each names the field in its message ----

int64_t integer(dom::element e, std::string_view field) {
  int64_t v = 0;
  if (e.get_int64().get(v)) fail(fmt::format("field '{}' must be an integer", field));
  return v;
}
int64_t non_negative(dom::element e, std::string_view field) {
  int64_t v = 0;
  if (e.get_int64().get(v) || v < 0) fail(fmt::format("field '{}' must be a non-negative integer", field));
  return v;
}
uint64_t unsigned_integer(dom::element e, std::string_view field) {
  uint64_t v = 0;
  if (e.get_uint64().get(v)) fail(fmt::format("field '{}' must be a non-negative integer", field));
  return v;
}
// An int32 in [lo, INT32_MAX].
int32_t int32_at_least(dom::element e, std::string_view field, int32_t lo) {
  int64_t v = 0;
  if (e.get_int64().get(v) || v < lo) {
    fail(lo == 0 ? fmt::format("field '{}' must be a non-negative integer", field)
                 : fmt::format("field '{}' must be an integer >= {}", field, lo));
  }
  if (v > std::numeric_limits<int32_t>::max())
    fail(fmt::format("field '{}' is {}, more than the largest allowed, {}", field, v,
                     std::numeric_limits<int32_t>::max()));
  return static_cast<int32_t>(v);
}
// A number; JSON null (what writers emit for NaN and infinities) reads as NaN.
double number_or_null(dom::element e, std::string_view field) {
  if (e.is_null()) return std::numeric_limits<double>::quiet_NaN();
  double v = 0.0;
  if (e.get_double().get(v)) fail(fmt::format("field '{}' must be a number", field));
  return v;
}
std::string_view string(dom::element e, std::string_view field) {
  std::string_view v;
  if (e.get_string().get(v)) fail(fmt::format("field '{}' must be a string", field));
  return v;
}
// An element of an array field.
double array_number(dom::element e, std::string_view field) {
  if (e.is_null()) return std::numeric_limits<double>::quiet_NaN();
  double v = 0.0;
  if (e.get_double().get(v)) fail(fmt::format("field '{}' must be an array of numbers", field));
  return v;
}
int64_t array_index(dom::element e, std::string_view field,
                    int64_t max = std::numeric_limits<int64_t>::max()) {
  int64_t v = 0;
  if (e.get_int64().get(v) || v < 0 || v > max) {
    fail(fmt::format("field '{}' must be an array of non-negative integers", field));
  }
  return v;
}
dom::object object(dom::element e, std::string_view field) {
  dom::object v;
  if (e.get_object().get(v)) fail(fmt::format("field '{}' must be an object", field));
  return v;
}
dom::array array(dom::element e, std::string_view field) {
  dom::array v;
  if (e.get_array().get(v)) fail(fmt::format("field '{}' must be an array", field));
  return v;
}
// A field of a nested object; `field` is its full name ("devices[2].id").
dom::element member(dom::object o, std::string_view key, const std::string& field) {
  dom::element v;
  if (o[key].get(v)) fail(fmt::format("missing field '{}'", field));
  return v;
}
std::string nested(std::string_view parent, size_t index, std::string_view key) {
  return fmt::format("{}[{}].{}", parent, index, key);
}

// A positive number (a bandwidth) or a non-negative one (a latency), named in the message.
double positive_number(dom::element e, std::string_view field) {
  double v = 0.0;
  if (e.get_double().get(v) || !(v > 0.0)) fail(fmt::format("field '{}' must be a positive number", field));
  return v;
}
double non_negative_number(dom::element e, std::string_view field) {
  double v = 0.0;
  if (e.get_double().get(v) || !(v >= 0.0))
    fail(fmt::format("field '{}' must be a non-negative number", field));
  return v;
}

// The header's "cluster" object (docs/trace-format.md "The cluster").
TraceClusterInfo cluster_of(dom::element e) {
  dom::object c = object(e, "cluster");
  TraceClusterInfo info;
  info.nodes = int32_at_least(member(c, "nodes", "cluster.nodes"), "cluster.nodes", 1);
  info.gpus_per_node =
      int32_at_least(member(c, "gpus_per_node", "cluster.gpus_per_node"), "cluster.gpus_per_node", 1);
  dom::object intra = object(member(c, "intra", "cluster.intra"), "cluster.intra");
  info.intra_topology =
      std::string(string(member(intra, "topology", "cluster.intra.topology"), "cluster.intra.topology"));
  info.intra_link = std::string(string(member(intra, "link", "cluster.intra.link"), "cluster.intra.link"));
  info.intra_bandwidth_bytes_per_s =
      positive_number(member(intra, "bandwidth", "cluster.intra.bandwidth"), "cluster.intra.bandwidth");
  info.intra_latency_ns = non_negative_number(member(intra, "latency_ns", "cluster.intra.latency_ns"),
                                              "cluster.intra.latency_ns");
  dom::object rails = object(member(c, "rails", "cluster.rails"), "cluster.rails");
  info.rails_per_node =
      int32_at_least(member(rails, "per_node", "cluster.rails.per_node"), "cluster.rails.per_node", 1);
  info.rail_kind = std::string(string(member(rails, "kind", "cluster.rails.kind"), "cluster.rails.kind"));
  info.rail_bandwidth_bytes_per_s =
      positive_number(member(rails, "bandwidth", "cluster.rails.bandwidth"), "cluster.rails.bandwidth");
  info.rail_latency_ns = non_negative_number(member(rails, "latency_ns", "cluster.rails.latency_ns"),
                                             "cluster.rails.latency_ns");
  return info;
}

// A collective span's phase args (docs/trace-format.md "Hierarchical all-reduce phases"): none of
// the six, or all six, each a non-negative integer offset or duration inside the span.
void check_phases(dom::element args, int64_t dur_ns) {
  struct PhaseKeys {
    std::string_view phase, start, dur;
  };
  static constexpr std::array<PhaseKeys, 3> kPhases = {{{"rs", "phase_rs_start_ns", "phase_rs_dur_ns"},
                                                        {"net", "phase_net_start_ns", "phase_net_dur_ns"},
                                                        {"ag", "phase_ag_start_ns", "phase_ag_dur_ns"}}};
  dom::object o;
  if (args.get_object().get(o)) return;
  std::array<dom::element, 6> found;
  int present = 0;
  std::string_view missing;
  for (size_t i = 0; i < 6; ++i) {
    const std::string_view key = i % 2 == 0 ? kPhases[i / 2].start : kPhases[i / 2].dur;
    if (o[key].get(found[i])) {
      if (missing.empty()) missing = key;
    } else {
      ++present;
    }
  }
  if (present == 0) return;
  if (present != 6)
    fail(fmt::format(
        "missing field 'args.{}' (a hierarchical all-reduce's phases come as all six phase_* fields)",
        missing));
  for (size_t p = 0; p < 3; ++p) {
    const int64_t start = non_negative(found[2 * p], fmt::format("args.{}", kPhases[p].start));
    const int64_t dur = non_negative(found[2 * p + 1], fmt::format("args.{}", kPhases[p].dur));
    if (start > dur_ns || dur > dur_ns - start)
      fail(fmt::format("phase '{}' ({} + {} ns) ends after its span (dur {} ns)", kPhases[p].phase, start,
                       dur, dur_ns));
  }
}

std::vector<TraceBucketInfo> buckets_of(dom::element e, std::string_view field) {
  std::vector<TraceBucketInfo> buckets;
  size_t i = 0;
  for (dom::element item : array(e, field)) {
    dom::object b = object(item, fmt::format("{}[{}]", field, i));
    TraceBucketInfo info;
    info.id = int32_at_least(member(b, "id", nested(field, i, "id")), nested(field, i, "id"), 0);
    const std::string params_field = nested(field, i, "params");
    for (dom::element p : array(member(b, "params", params_field), params_field)) {
      info.params.push_back(
          static_cast<int>(array_index(p, params_field, std::numeric_limits<int32_t>::max())));
    }
    info.bytes = unsigned_integer(member(b, "bytes", nested(field, i, "bytes")), nested(field, i, "bytes"));
    buckets.push_back(std::move(info));
    ++i;
  }
  return buckets;
}

// `s` equals the literal `name`; with the length known at compile time the compare is inlined.
template <size_t N>
inline bool equals(std::string_view s, const char (&name)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), name, N - 1) == 0;
}

// The enum parsers below run on every line: they dispatch on a letter and compare against
// literals (which the compiler inlines) instead of looping over to_string() names.
bool phase_of(std::string_view s, Phase& phase) {
  auto is = [&]<size_t N>(const char(&name)[N], Phase p) {
    if (!equals(s, name)) return false;
    phase = p;
    return true;
  };
  if (s.empty()) return false;
  switch (s[0]) {
    case 'n': return is("none", Phase::kNone);
    case 'd': return is("data", Phase::kData);
    case 'f': return is("forward", Phase::kForward);
    case 'b': return is("backward", Phase::kBackward);
    case 'o': return is("optimizer", Phase::kOptimizer);
    case 'c': return is("checkpoint", Phase::kCheckpoint);
  }
  return false;
}
bool stream_of(std::string_view s, StreamKind& stream) {
  auto is = [&]<size_t N>(const char(&name)[N], StreamKind k) {
    if (!equals(s, name)) return false;
    stream = k;
    return true;
  };
  switch (s.size()) {
    case 7: return is("compute", StreamKind::kCompute);
    case 4: return s[1] == 'o' && s[2] == 'm' ? is("comm", StreamKind::kComm) : is("copy", StreamKind::kCopy);
  }
  return false;
}
bool event_type_of(std::string_view s, EventType& type) {
  auto is = [&]<size_t N>(const char(&name)[N], EventType t) {
    if (!equals(s, name)) return false;
    type = t;
    return true;
  };
  if (s.empty()) return false;
  switch (s[0]) {
    case 's': return s.size() == 4 ? is("span", EventType::kSpan) : is("samples", EventType::kSamples);
    case 'i': return is("instant", EventType::kInstant);
    case 'c': return is("counter", EventType::kCounter);
    case 't': return is("transfer", EventType::kTransfer);
    case 'v': return is("values", EventType::kValues);
    case 'b': return is("buckets", EventType::kBuckets);
  }
  return false;
}

// "MAJOR.MINOR", each a plain run of 1 to 6 decimal digits.
bool parse_version(std::string_view version, int& major, int& minor) {
  auto number = [](std::string_view digits, int& out) {
    if (digits.empty() || digits.size() > 6) return false;
    for (char c : digits)
      if (c < '0' || c > '9') return false;
    std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return true;
  };
  const size_t dot = version.find('.');
  return dot != std::string_view::npos && number(version.substr(0, dot), major) &&
         number(version.substr(dot + 1), minor);
}

bool is_blank(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

// ---- event fields, sorted into slots in one pass over the object ----

enum Key : uint8_t {
  kType,
  kTs,
  kRank,
  kDev,
  kStep,
  kPhase,
  kName,
  kCat,
  kStream,
  kDur,
  kArgs,
  kValues,
  kSrc,
  kDst,
  kBytes,
  kFlow,
  kColl,
  kAlgo,
  kAlgoStep,
  kChunk,
  kParam,
  kWhen,
  kNorm,
  kIndices,
  kReason,
  kBuckets,
  kStride,
  kSrcRank,
  kDstRank,
  kEpoch,
  kKeyCount,
  kUnknownKey
};
constexpr std::string_view kKeyNames[kKeyCount] = {
    "type",  "ts",     "rank", "dev",     "step",   "phase",   "name",   "cat",      "stream",    "dur",
    "args",  "values", "src",  "dst",     "bytes",  "flow",    "coll",   "algo",     "algo_step", "chunk",
    "param", "when",   "norm", "indices", "reason", "buckets", "stride", "src_rank", "dst_rank",  "epoch"};

// Dispatches on length and first letters, then confirms the whole key: this runs for every field
// of every line, so it avoids a loop of string compares.
Key key_of(std::string_view k) {
  auto is = [&]<size_t N>(const char(&name)[N], Key key) { return equals(k, name) ? key : kUnknownKey; };
  if (k.size() < 2) return kUnknownKey;
  switch (k.size()) {
    case 2: return is("ts", kTs);
    case 3:
      switch (k[0]) {
        case 'd': return k[1] == 'e' ? is("dev", kDev) : (k[1] == 'u' ? is("dur", kDur) : is("dst", kDst));
        case 'c': return is("cat", kCat);
        case 's': return is("src", kSrc);
      }
      break;
    case 4:
      switch (k[0]) {
        case 't': return is("type", kType);
        case 'r': return is("rank", kRank);
        case 's': return is("step", kStep);
        case 'n': return k[1] == 'a' ? is("name", kName) : is("norm", kNorm);
        case 'a': return k[1] == 'r' ? is("args", kArgs) : is("algo", kAlgo);
        case 'f': return is("flow", kFlow);
        case 'c': return is("coll", kColl);
        case 'w': return is("when", kWhen);
      }
      break;
    case 5:
      switch (k[0]) {
        case 'p': return k[1] == 'h' ? is("phase", kPhase) : is("param", kParam);
        case 'b': return is("bytes", kBytes);
        case 'c': return is("chunk", kChunk);
        case 'e': return is("epoch", kEpoch);
      }
      break;
    case 6:
      switch (k[0]) {
        case 's': return k.size() > 3 && k[3] == 'i' ? is("stride", kStride) : is("stream", kStream);
        case 'v': return is("values", kValues);
        case 'r': return is("reason", kReason);
      }
      break;
    case 7: return k[0] == 'i' ? is("indices", kIndices) : is("buckets", kBuckets);
    case 8: return k[0] == 's' ? is("src_rank", kSrcRank) : is("dst_rank", kDstRank);
    case 9: return is("algo_step", kAlgoStep);
  }
  return kUnknownKey;
}

}  // namespace

// An event's known fields by key (declared in trace_parser.hpp so the read_* members can take it).
class Fields {
 public:
  explicit Fields(dom::object o) {
    for (dom::key_value_pair kv : o) {
      const Key k = key_of(kv.key);
      if (k == kUnknownKey) continue;  // unknown fields are allowed (newer minor versions)
      slots_[k] = kv.value;
      present_ |= 1u << k;
    }
  }
  static_assert(kKeyCount <= 32, "Fields::present_ has one bit per key");
  bool has(Key k) const { return (present_ >> k) & 1u; }
  dom::element operator[](Key k) const {
    if (!has(k)) fail(fmt::format("missing field '{}'", kKeyNames[k]));
    return slots_[k];
  }

 private:
  dom::element slots_[kKeyCount];
  uint32_t present_ = 0;
};

void TraceParser::reset() {
  own_rank_ = -1;
  strings_.clear();
  recent_.clear();
  device_known_.clear();
  known_names_.clear();
  known_categories_.clear();
}

void TraceParser::continue_file_of(const TraceParser& first) {
  device_known_ = first.device_known_;
  own_rank_ = first.own_rank_;
}

uint32_t TraceParser::intern(TraceData& data, std::string_view s) {
  if (const int64_t cached = recent_.find(s); cached >= 0) return static_cast<uint32_t>(cached);
  uint32_t index = 0;
  if (auto it = strings_.find(s); it != strings_.end()) {
    index = it->second;
  } else {
    index = data.intern(s);
    strings_.emplace(std::string(s), index);
  }
  recent_.put(s, index);
  return index;
}

// ---- the header ----

void TraceParser::parse_header(TraceData& data, std::string_view line, uint32_t line_no) {
  auto bad = [&](std::string_view reason) {
    return Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", data.path, line_no, reason));
  };
  dom::element root;
  dom::object obj;
  std::string_view type;
  const simdjson::error_code error = json_.parse(line.data(), line.size()).get(root);
  if (error == simdjson::DEPTH_ERROR || error == simdjson::NUMBER_ERROR) throw bad(json_error_reason(error));
  if (error || root.get_object().get(obj) || obj["type"].get_string().get(type) || type != "header") {
    if (line_no == 1 && line.size() >= 2 && static_cast<unsigned char>(line[0]) == 0x1f &&
        static_cast<unsigned char>(line[1]) == 0x8b)
      throw bad(
          "a gzip-compressed file; dpscope reads plain .jsonl and zstd-compressed .jsonl.zst: gunzip it "
          "first");
    throw bad("not a dpscope trace: the first line must be a header object with \"type\":\"header\"");
  }
  std::string_view format;
  if (obj["format"].get_string().get(format) || format != kTraceFormatName) {
    throw bad(fmt::format("not a dpscope trace: header field 'format' must be \"{}\"", kTraceFormatName));
  }
  std::string_view version;
  int major = 0;
  int minor = 0;
  if (obj["version"].get_string().get(version) || !parse_version(version, major, minor)) {
    throw bad("header field 'version' must be a string \"MAJOR.MINOR\" (e.g. \"1.0\")");
  }
  if (major > kTraceFormatMajor) {
    throw Error(
        ErrorKind::kFormat,
        fmt::format("{}: trace format version {} is newer than this dpscope supports ({}.x); upgrade dpscope",
                    data.path, version, kTraceFormatMajor));
  }
  if (major < kTraceFormatMajor) {
    throw bad(fmt::format("trace format version {} is not supported (this dpscope reads {}.x)", version,
                          kTraceFormatMajor));
  }
  data.version = std::string(version);

  try {
    TraceHeader& h = data.header;
    h = TraceHeader{};
    h.clock = std::string(string(member(obj, "clock", "clock"), "clock"));
    dom::element run;
    own_rank_ = -1;
    if (!obj["run"].get(run)) {
      (void)object(run, "run");
      h.run_json = simdjson::minify(run);
      // A process rank's file (rank_traces.hpp): transfers name its own devices under its rank too.
      int64_t rank = -1;
      if (!run["process"]["rank"].get_int64().get(rank) && rank >= 0 && rank <= INT32_MAX)
        own_rank_ = static_cast<int32_t>(rank);
    }
    size_t i = 0;
    for (dom::element item : array(member(obj, "devices", "devices"), "devices")) {
      dom::object d = object(item, fmt::format("devices[{}]", i));
      TraceDeviceInfo info;
      const std::string id_field = nested("devices", i, "id");
      info.id = int32_at_least(member(d, "id", id_field), id_field, 0);
      if (info.id > 65535) fail(fmt::format("field '{}' must be at most 65535", id_field));
      if (known_device(info.id)) fail(fmt::format("device id {} is listed twice", info.id));
      info.name =
          std::string(string(member(d, "name", nested("devices", i, "name")), nested("devices", i, "name")));
      info.kind =
          std::string(string(member(d, "kind", nested("devices", i, "kind")), nested("devices", i, "kind")));
      dom::element v;
      if (!d["hardware"].get(v)) info.hardware = std::string(string(v, nested("devices", i, "hardware")));
      if (!d["memory_bytes"].get(v))
        info.memory_bytes = unsigned_integer(v, nested("devices", i, "memory_bytes"));
      if (!d["peak_flops"].get(v)) info.peak_flops = number_or_null(v, nested("devices", i, "peak_flops"));
      if (!d["mem_bandwidth"].get(v))
        info.mem_bandwidth_bytes_per_s = number_or_null(v, nested("devices", i, "mem_bandwidth"));
      if (static_cast<size_t>(info.id) >= device_known_.size()) device_known_.resize(info.id + 1, 0);
      device_known_[info.id] = 1;
      h.devices.push_back(std::move(info));
      ++i;
    }
    dom::element section;
    if (!obj["links"].get(section)) {
      i = 0;
      for (dom::element item : array(section, "links")) {
        dom::object l = object(item, fmt::format("links[{}]", i));
        TraceLinkInfo info;
        info.src = int32_at_least(member(l, "src", nested("links", i, "src")), nested("links", i, "src"), 0);
        info.dst = int32_at_least(member(l, "dst", nested("links", i, "dst")), nested("links", i, "dst"), 0);
        dom::element v;
        if (!l["kind"].get(v)) info.kind = std::string(string(v, nested("links", i, "kind")));
        if (!l["bandwidth"].get(v))
          info.bandwidth_bytes_per_s = number_or_null(v, nested("links", i, "bandwidth"));
        if (!l["latency_ns"].get(v)) info.latency_ns = number_or_null(v, nested("links", i, "latency_ns"));
        h.links.push_back(std::move(info));
        ++i;
      }
    }
    if (!obj["params"].get(section)) {
      i = 0;
      for (dom::element item : array(section, "params")) {
        dom::object p = object(item, fmt::format("params[{}]", i));
        TraceParamInfo info;
        info.index =
            int32_at_least(member(p, "index", nested("params", i, "index")), nested("params", i, "index"), 0);
        info.name =
            std::string(string(member(p, "name", nested("params", i, "name")), nested("params", i, "name")));
        const std::string shape_field = nested("params", i, "shape");
        for (dom::element dim : array(member(p, "shape", shape_field), shape_field)) {
          info.shape.push_back(array_index(dim, shape_field));
        }
        info.bytes =
            unsigned_integer(member(p, "bytes", nested("params", i, "bytes")), nested("params", i, "bytes"));
        h.params.push_back(std::move(info));
        ++i;
      }
    }
    if (!obj["buckets"].get(section)) h.buckets = buckets_of(section, "buckets");
    if (!obj["cluster"].get(section)) h.cluster = cluster_of(section);
  } catch (LineError& e) {
    throw bad("header: " + e.reason);
  }
}

// ---- events ----
//
// parse_event() reads the fields every event has (read_common), then the type's own fields
// (read_<type>), checks the times (check_times) and appends the event (append).

namespace {

// Every ts and ts + dur lies in [-2^62, 2^62) ns (146 years around the clock's origin), so ts + dur
// and the difference of any two times fit in int64: stats and the viewer subtract them freely.
constexpr int64_t kTimeLimitNs = int64_t{1} << 62;

void check_times(const Event& e) {
  if (e.ts_ns < -kTimeLimitNs || e.ts_ns >= kTimeLimitNs)
    fail(fmt::format("field 'ts' is {}, outside the supported range [-{}, {}) ns", e.ts_ns, kTimeLimitNs,
                     kTimeLimitNs));
  if (e.ts_ns > (kTimeLimitNs - 1) - e.dur_ns)  // ts + dur >= 2^62, without overflowing
    fail(fmt::format("ts + dur = {} + {} is not below {} ns, the end of the supported range", e.ts_ns,
                     e.dur_ns, kTimeLimitNs));
}

}  // namespace

void TraceParser::read_common(const Fields& f, Event& e) {
  e.ts_ns = integer(f[kTs], "ts");
  e.rank = int32_at_least(f[kRank], "rank", 0);
  e.dev = read_device(f, kDev);
  const int64_t step = integer(f[kStep], "step");
  if (step < -1) fail("field 'step' must be an integer >= -1");
  if (step > std::numeric_limits<int32_t>::max())
    fail(fmt::format("field 'step' is {}, above the largest step a trace may have ({})", step,
                     std::numeric_limits<int32_t>::max()));
  e.step = static_cast<int32_t>(step);
  const std::string_view phase_text = string(f[kPhase], "phase");
  Phase phase = Phase::kNone;
  if (!phase_of(phase_text, phase)) fail(fmt::format("unknown phase '{}'", phase_text));
  e.phase = phase;
}

int32_t TraceParser::read_device(const Fields& f, int key) {
  const auto k = static_cast<Key>(key);
  const int64_t id = integer(f[k], kKeyNames[k]);
  if (!known_device(id))
    fail(fmt::format("field '{}' is {}, which is not a device in the header", kKeyNames[k], id));
  return static_cast<int32_t>(id);
}

void TraceParser::read_name(TraceData& data, const Fields& f, Event& e) {
  e.name = intern(data, string(f[kName], "name"));
  while (known_names_.size() <= e.name)
    known_names_.push_back(event_name_from_string(data.strings[known_names_.size()]));
  e.known = known_names_[e.name];
}

void TraceParser::read_stream(const Fields& f, Event& e) {
  const std::string_view s = string(f[kStream], "stream");
  StreamKind stream = StreamKind::kCompute;
  if (!stream_of(s, stream)) fail(fmt::format("unknown stream '{}'", s));
  e.stream = stream;
}

// Numeric and string args of a span or instant; the others are dropped.
void TraceParser::read_args(TraceData& data, const Fields& f, Event& e) {
  if (!f.has(kArgs)) return;
  arg_values_.clear();
  arg_texts_.clear();
  for (dom::key_value_pair kv : object(f[kArgs], "args")) {
    double v = 0.0;
    std::string_view text;
    if (!kv.value.get_double().get(v)) {
      arg_values_.emplace_back(intern(data, kv.key), v);
    } else if (!kv.value.get_string().get(text)) {
      const uint32_t key = intern(data, kv.key);  // the key first, then the text (a fixed order)
      arg_texts_.emplace_back(key, intern(data, text));
    }
  }
  if (!arg_values_.empty() || !arg_texts_.empty()) {
    e.payload = static_cast<int32_t>(data.args.size());
    data.args.push_back(data.add_args(arg_values_, arg_texts_));
  }
}

void TraceParser::read_span(TraceData& data, const Fields& f, Event& e) {
  read_name(data, f, e);
  e.cat = intern(data, string(f[kCat], "cat"));
  while (known_categories_.size() <= e.cat)
    known_categories_.push_back(span_category_from_string(data.strings[known_categories_.size()]));
  e.category = known_categories_[e.cat];
  read_stream(f, e);
  e.dur_ns = non_negative(f[kDur], "dur");
  read_args(data, f, e);
  if (e.category == SpanCategory::kCollective && f.has(kArgs)) check_phases(f[kArgs], e.dur_ns);
}

void TraceParser::read_counter(TraceData& data, const Fields& f, Event& e) {
  read_name(data, f, e);
  arg_values_.clear();
  for (dom::key_value_pair kv : object(f[kValues], "values")) {
    double v = std::numeric_limits<double>::quiet_NaN();      // JSON null reads as NaN
    if (!kv.value.is_null() && kv.value.get_double().get(v))  // the field's name only on failure
      fail(fmt::format("field 'values.{}' must be a number", kv.key));
    arg_values_.emplace_back(intern(data, kv.key), v);
  }
  e.payload = static_cast<int32_t>(data.counters.size());
  data.counters.push_back(data.add_args(arg_values_, {}));
}

void TraceParser::read_transfer(TraceData& data, const Fields& f, Event& e) {
  read_name(data, f, e);
  read_stream(f, e);
  e.dur_ns = non_negative(f[kDur], "dur");
  // An end with src_rank/dst_rank other than this file's rank is a device of that rank's header
  // (docs/trace-format.md): unknown here (-1), kept in remote_ends for a merge of the ranks.
  RemoteEnds remote;
  auto end = [&](Key device_key, Key rank_key, int32_t& remote_rank, int32_t& remote_id) -> int32_t {
    if (f.has(rank_key)) {
      const int32_t rank = int32_at_least(f[rank_key], kKeyNames[rank_key], 0);
      if (rank != own_rank_) {
        remote_rank = rank;
        remote_id = int32_at_least(f[device_key], kKeyNames[device_key], 0);
        return -1;
      }
    }
    return read_device(f, device_key);
  };
  Transfer t;
  t.src = end(kSrc, kSrcRank, remote.src_rank, remote.src);
  t.dst = end(kDst, kDstRank, remote.dst_rank, remote.dst);
  t.bytes = unsigned_integer(f[kBytes], "bytes");
  t.flow = unsigned_integer(f[kFlow], "flow");
  if (f.has(kColl)) t.coll = non_negative(f[kColl], "coll");
  if (f.has(kAlgo)) t.algo = intern(data, string(f[kAlgo], "algo"));
  if (f.has(kAlgoStep)) t.algo_step = int32_at_least(f[kAlgoStep], "algo_step", -1);
  if (f.has(kChunk)) t.chunk = int32_at_least(f[kChunk], "chunk", -1);
  if (remote.src_rank >= 0 || remote.dst_rank >= 0) {
    t.remote = static_cast<int32_t>(data.remote_ends.size());
    data.remote_ends.push_back(remote);
  }
  e.payload = static_cast<int32_t>(data.transfers.size());
  data.transfers.push_back(t);
}

void TraceParser::read_values(TraceData& data, const Fields& f, Event& e) {
  read_name(data, f, e);
  ValueSample sample;
  sample.param = int32_at_least(f[kParam], "param", -1);
  const std::string_view when = string(f[kWhen], "when");
  sample.when = intern(data, when);
  sample.when_kind = values_when_from_string(when);
  for (dom::element v : array(f[kValues], "values")) {
    sample.values.push_back(static_cast<float>(array_number(v, "values")));
  }
  sample.norm = number_or_null(f[kNorm], "norm");
  if (f.has(kStride)) {
    sample.stride = non_negative(f[kStride], "stride");
    if (sample.stride < 1) fail("field 'stride' must be an integer >= 1");
  }
  e.payload = static_cast<int32_t>(data.values.size());
  data.values.push_back(std::move(sample));
}

void TraceParser::read_samples(TraceData& data, const Fields& f, Event& e) {
  SampleIndices samples;
  for (dom::element v : array(f[kIndices], "indices")) {
    samples.indices.push_back(array_index(v, "indices"));
  }
  if (f.has(kEpoch)) samples.epoch = non_negative(f[kEpoch], "epoch");
  e.payload = static_cast<int32_t>(data.samples.size());
  data.samples.push_back(std::move(samples));
}

void TraceParser::read_buckets(TraceData& data, const Fields& f, Event& e) {
  BucketAssignment assignment;
  const std::string_view reason = string(f[kReason], "reason");
  assignment.reason = intern(data, reason);
  assignment.reason_kind = bucket_reason_from_string(reason);
  assignment.buckets = buckets_of(f[kBuckets], "buckets");
  e.payload = static_cast<int32_t>(data.buckets.size());
  data.buckets.push_back(std::move(assignment));
}

void TraceParser::parse_event(TraceData& data, std::string_view line, uint32_t line_no, bool padded) {
  dom::element root;
  if (const simdjson::error_code error = json_.parse(line.data(), line.size(), !padded).get(root))
    fail(json_error_reason(error));
  dom::object obj;
  if (root.get_object().get(obj)) fail("not a JSON object");
  const Fields f(obj);

  Event e;
  const std::string_view type_text = string(f[kType], "type");
  EventType type = EventType::kInstant;
  if (!event_type_of(type_text, type)) {
    if (type_text == "header") fail("a second header (the header must be the first line)");
    return;  // an event type from a newer minor version: skipped
  }
  e.type = type;
  e.line = line_no;
  read_common(f, e);
  switch (e.type) {
    case EventType::kSpan: read_span(data, f, e); break;
    case EventType::kInstant:
      read_name(data, f, e);
      read_args(data, f, e);
      break;
    case EventType::kCounter: read_counter(data, f, e); break;
    case EventType::kTransfer: read_transfer(data, f, e); break;
    case EventType::kValues: read_values(data, f, e); break;
    case EventType::kSamples: read_samples(data, f, e); break;
    case EventType::kBuckets: read_buckets(data, f, e); break;
  }
  check_times(e);
  append(data, e);
}

void TraceParser::append(TraceData& data, const Event& e) {
  if (data.events.empty()) {
    data.min_ts_ns = e.ts_ns;
    data.max_end_ns = e.end_ns();
  } else {
    data.min_ts_ns = std::min(data.min_ts_ns, e.ts_ns);
    data.max_end_ns = std::max(data.max_end_ns, e.end_ns());
  }
  data.events.push_back(e);
}

// ---- the line loop ----

size_t TraceParser::parse(TraceData& data, std::string_view text, uint32_t& next_line, bool& has_header) {
  size_t pos = 0;
  consumed_ = 0;
  while (pos < text.size()) {
    const void* newline = std::memchr(text.data() + pos, '\n', text.size() - pos);
    if (newline == nullptr) break;  // an incomplete last line: left for later
    const size_t end = static_cast<size_t>(static_cast<const char*>(newline) - text.data());
    const std::string_view line = text.substr(pos, end - pos);
    const uint32_t line_no = next_line++;
    pos = end + 1;
    consumed_ = pos;
    if (is_blank(line)) continue;
    if (!has_header) {
      parse_header(data, line, line_no);
      has_header = true;
      continue;
    }
    try {
      // simdjson reads up to SIMDJSON_PADDING bytes past a document (their content does not
      // matter); where the text goes on that far, the line is parsed in place instead of copied.
      parse_event(data, line, line_no, text.size() - end >= simdjson::SIMDJSON_PADDING);
    } catch (LineError& error) {
      if (options_.strict) {
        throw Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", data.path, line_no, error.reason));
      }
      data.problems.push_back({line_no, std::move(error.reason)});
    }
  }
  return pos;
}

}  // namespace dpscope::trace::detail
