// import_kineto(): torch.profiler (Kineto) Chrome traces -> dpscope traces (kineto_import.hpp,
// docs/pytorch-import.md).
//
// Sections: reading a Kineto file · one rank's run (steps, phases, collectives) · writing the
// dpscope lines · the files IN names and the run they make.
#include "dpscope/trace_tools/kineto_import.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "dpscope/base/ascii.hpp"
#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/format_bytes.hpp"
#include "dpscope/trace_tools/json_text.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"

namespace dpscope::trace {

namespace {

namespace dom = simdjson::dom;

// ---- reading a Kineto file ----

// Times of a Kineto trace are microseconds (with ns decimals) since baseTimeNanoseconds. Both are
// kept within +-2^61 ns, so their sum (the wall-clock time) fits the format's range (2^62 ns).
constexpr int64_t kTimeLimitNs = int64_t{1} << 61;

// One complete ("X") event of the trace.
struct KinetoSpan {
  std::string name;
  int64_t start_ns = 0;  // wall clock (baseTimeNanoseconds + ts)
  int64_t end_ns = 0;
  int64_t tid = -1;        // -1: a tid that is not a number (Kineto's own summary rows)
  bool kernel = false;     // cat "kernel": on a GPU stream
  int device = -1;         // a kernel's args.device
  uint64_t bytes = 0;      // a collective's message size, 0 when the trace does not say
  std::string collective;  // record_param_comms' args."Collective name" ("allreduce")
};

struct CudaDevice {
  int id = 0;
  std::string name;
  uint64_t memory_bytes = 0;
};

struct KinetoFile {
  std::filesystem::path path;
  bool distributed = false;  // has distributedInfo
  int rank = 0;
  int world_size = 1;
  std::string backend;
  std::string host;
  std::vector<CudaDevice> cuda_devices;
  std::vector<KinetoSpan> spans;
};

// Bytes of one element of a Kineto dtype: "float" (Input type) or "Float" (record_param_comms).
std::optional<uint64_t> dtype_bytes(std::string_view dtype) {
  std::string t = ascii_lower(dtype);
  if (t.starts_with("c10::")) t.erase(0, 5);
  static const std::map<std::string, uint64_t, std::less<>> kSizes = {
      {"float", 4},    {"double", 8},        {"half", 2},  {"bfloat16", 2},      {"long", 8},
      {"long int", 8}, {"int", 4},           {"short", 2}, {"char", 1},          {"signed char", 1},
      {"bool", 1},     {"unsigned char", 1}, {"byte", 1},  {"float8_e4m3fn", 1}, {"float8_e5m2", 1}};
  const auto it = kSizes.find(t);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

// Sizes in a trace are user data: a product past int64 is refused, never wrapped (a wrapped size once
// read "all_reduce 16777216.00 TiB"). `bad(what)` makes the Error naming the event.
template <typename Bad>
int64_t size_product(int64_t a, int64_t b, std::string_view what, const Bad& bad) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    throw bad(fmt::format("{}: {} x {} overflows a 64-bit integer", what, a, b));
  return product;
}

// Product of a shape ([1188] or [4, 32]); nullopt when it is not an array of non-negative integers.
template <typename Bad>
std::optional<int64_t> elements_of(dom::element shape, const Bad& bad) {
  dom::array dims;
  if (shape.get_array().get(dims)) return std::nullopt;
  int64_t n = 1;
  for (dom::element d : dims) {
    int64_t v = 0;
    if (d.get_int64().get(v) || v < 0) return std::nullopt;
    n = size_product(n, v, "'Input Dims'", bad);
  }
  return n;
}

// A collective's message bytes from its args: record_param_comms' "In msg nelems" and "dtype", or
// the first input's "Input Dims" and "Input type" (record_shapes=True). 0 when neither is there.
template <typename Bad>
uint64_t collective_bytes(dom::object args, const Bad& bad) {
  int64_t nelems = 0;
  std::string_view dtype;
  if (!args["In msg nelems"].get_int64().get(nelems) && nelems >= 0 &&
      !args["dtype"].get_string().get(dtype)) {
    if (auto size = dtype_bytes(dtype))
      return static_cast<uint64_t>(
          size_product(nelems, static_cast<int64_t>(*size), "'In msg nelems' x bytes per element", bad));
  }
  dom::array dims;
  dom::array types;
  if (args["Input Dims"].get_array().get(dims) || args["Input type"].get_array().get(types)) return 0;
  dom::element first_dims;
  std::string_view first_type;
  if (dims.at(0).get(first_dims) || types.at(0).get_string().get(first_type)) return 0;
  const std::optional<uint64_t> size = dtype_bytes(first_type);
  const std::optional<int64_t> n = elements_of(first_dims, bad);
  if (!size || !n) return 0;
  return static_cast<uint64_t>(
      size_product(*n, static_cast<int64_t>(*size), "'Input Dims' x bytes per element", bad));
}

KinetoFile parse_kineto(const std::filesystem::path& path) {
  const std::string file = path.string();
  auto bad = [&](std::string_view reason) {
    return Error(ErrorKind::kFormat, fmt::format("{}: {}", file, reason));
  };
  const InputFile in = InputFile::open(path, "torch.profiler trace", kMaxKinetoFileBytes);
  const std::string text = in.read_all("torch.profiler trace");
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b)
    throw Error(ErrorKind::kUnsupported,
                fmt::format("{}: a gzip-compressed trace; dpscope reads plain JSON: gunzip it first", file));
  dom::parser parser;
  dom::element root;
  if (const simdjson::error_code error = parser.parse(text).get(root))
    throw bad(fmt::format("not JSON ({})", simdjson::error_message(error)));
  dom::object obj;
  if (root.get_object().get(obj)) throw bad("not a torch.profiler trace: the file is not a JSON object");
  dom::array events;
  if (obj["traceEvents"].get_array().get(events))
    throw bad("not a torch.profiler trace: it has no 'traceEvents' array");

  KinetoFile k;
  k.path = path;
  int64_t base_ns = 0;
  dom::element base;
  if (!obj["baseTimeNanoseconds"].get(base)) {
    if (base.get_int64().get(base_ns) || base_ns < 0 || base_ns >= kTimeLimitNs)
      throw bad(fmt::format("'baseTimeNanoseconds' must be an integer from 0 to {}", kTimeLimitNs - 1));
  }
  dom::element info;
  if (!obj["distributedInfo"].get(info)) {
    dom::object d;
    int64_t rank = 0;
    int64_t world_size = 0;
    if (info.get_object().get(d) || d["rank"].get_int64().get(rank) ||
        d["world_size"].get_int64().get(world_size) || world_size < 1 || world_size > 999999 || rank < 0 ||
        rank >= world_size)
      throw bad(
          "'distributedInfo' must hold integers 'rank' and 'world_size' with 0 <= rank < world_size <= "
          "999999");
    k.distributed = true;
    k.rank = static_cast<int>(rank);
    k.world_size = static_cast<int>(world_size);
    std::string_view backend;
    if (!d["backend"].get_string().get(backend)) k.backend = std::string(backend);
  }
  std::string_view host;
  if (!obj["host_name"].get_string().get(host)) k.host = std::string(host);
  dom::array props;
  if (!obj["deviceProperties"].get_array().get(props)) {
    for (dom::element p : props) {
      CudaDevice dev;
      int64_t id = 0;
      std::string_view name;
      uint64_t memory = 0;
      if (p["id"].get_int64().get(id) || id < 0 || id > 65535) continue;  // nothing to name a device by
      dev.id = static_cast<int>(id);
      if (!p["name"].get_string().get(name)) dev.name = std::string(name);
      if (!p["totalGlobalMem"].get_uint64().get(memory)) dev.memory_bytes = memory;
      k.cuda_devices.push_back(std::move(dev));
    }
  }

  size_t i = 0;
  for (dom::element e : events) {
    auto bad_event = [&](std::string_view reason) {
      return bad(fmt::format("traceEvents[{}]: {}", i, reason));
    };
    dom::object ev;
    if (e.get_object().get(ev)) throw bad_event("not an object");
    std::string_view ph;
    if (ev["ph"].get_string().get(ph)) throw bad_event("no 'ph' (event type) string");
    if (ph != "X") {
      ++i;
      continue;  // metadata, flows and instants carry nothing dpscope shows
    }
    KinetoSpan s;
    std::string_view name;
    if (ev["name"].get_string().get(name)) throw bad_event("a complete ('X') event without a 'name' string");
    s.name = std::string(name);
    auto bad_field = [&](std::string_view what) {
      return bad_event(fmt::format("('{}'): {}", s.name, what));
    };
    double ts_us = 0.0;
    double dur_us = 0.0;
    if (ev["ts"].get_double().get(ts_us) || !std::isfinite(ts_us) ||
        std::fabs(ts_us) * 1e3 >= static_cast<double>(kTimeLimitNs))
      throw bad_field(
          fmt::format("'ts' must be a number of microseconds below {} in magnitude", kTimeLimitNs / 1000));
    if (ev["dur"].get_double().get(dur_us) || !std::isfinite(dur_us) || dur_us < 0 ||
        dur_us * 1e3 >= static_cast<double>(kTimeLimitNs))
      throw bad_field("'dur' must be a non-negative number of microseconds");
    s.start_ns = base_ns + std::llround(ts_us * 1e3);
    s.end_ns = s.start_ns + std::llround(dur_us * 1e3);
    int64_t tid = -1;
    if (!ev["tid"].get_int64().get(tid)) s.tid = tid;
    std::string_view cat;
    if (!ev["cat"].get_string().get(cat)) s.kernel = cat == "kernel";
    dom::object args;
    if (!ev["args"].get_object().get(args)) {
      int64_t device = -1;
      if (s.kernel && !args["device"].get_int64().get(device) && device >= 0 && device <= 65535)
        s.device = static_cast<int>(device);
      s.bytes = collective_bytes(args, bad_field);
      std::string_view collective;
      if (!args["Collective name"].get_string().get(collective)) s.collective = std::string(collective);
    }
    k.spans.push_back(std::move(s));
    ++i;
  }
  std::stable_sort(k.spans.begin(), k.spans.end(), [](const KinetoSpan& a, const KinetoSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  return k;
}

// ---- one rank's run: steps, phases, collectives ----

constexpr std::string_view kStepPrefix = "ProfilerStep#";
constexpr std::string_view kAccumulateGrad =
    "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad";
constexpr std::string_view kAccumulateGradInner = "torch::autograd::AccumulateGrad";

// The collective an op, kernel or record_param_comms name stands for, in dpscope's words
// ("allreduce", "AllReduce", "all_reduce" -> "all_reduce"); "" when the name is none.
std::string collective_op(std::string_view word) {
  std::string key;
  for (char c : word)
    if (std::isalnum(static_cast<unsigned char>(c)))
      key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  static const std::map<std::string, std::string, std::less<>> kOps = {
      {"allreduce", "all_reduce"},
      {"allreducecoalesced", "all_reduce"},
      {"broadcast", "broadcast"},
      {"allgather", "all_gather"},
      {"allgatherbase", "all_gather"},
      {"allgatherintotensor", "all_gather"},
      {"allgatherintotensorcoalesced", "all_gather"},
      {"reducescatter", "reduce_scatter"},
      {"reducescatterbase", "reduce_scatter"},
      {"reducescattertensor", "reduce_scatter"},
      {"reducescattertensorcoalesced", "reduce_scatter"},
      {"reduce", "reduce"},
      {"barrier", "barrier"},
      {"send", "send/recv"},
      {"recv", "send/recv"},
      {"sendrecv", "send/recv"},
      {"alltoall", "all_to_all"},
      {"alltoallbase", "all_to_all"},
      {"gather", "gather"},
      {"scatter", "scatter"}};
  const auto it = kOps.find(key);
  return it == kOps.end() ? std::string() : it->second;
}

// The collective a span does on the wire ("gloo:all_reduce", an NCCL kernel), or "".
std::string work_op(const KinetoSpan& s) {
  if (s.name.starts_with("gloo:")) return collective_op(std::string_view(s.name).substr(5));
  for (std::string_view prefix : {std::string_view("ncclKernel_"), std::string_view("ncclDevKernel_")}) {
    if (s.kernel && s.name.starts_with(prefix)) {
      std::string_view rest = std::string_view(s.name).substr(prefix.size());
      return collective_op(rest.substr(0, rest.find('_')));
    }
  }
  return "";
}

// The collective a host-side call enqueues ("c10d::allreduce_"), or "".
std::string call_op(const KinetoSpan& s) {
  if (!s.name.starts_with("c10d::")) return "";
  std::string_view rest = std::string_view(s.name).substr(6);
  return collective_op(rest);
}

struct Collective {
  std::string op;
  uint64_t bytes = 0;
  int64_t launched_ns = 0;  // the host call (or the work, when there is no call)
  int64_t start_ns = 0;     // the work on the wire (or the call)
  int64_t end_ns = 0;
};

// The collectives of a rank in launch order. A collective's time is its work (gloo's thread, the
// NCCL kernel) where the trace has it, paired with the calls of the same op in order; its launch is
// the host call. record_param_comms (with its "Collective name") stands for the calls when the trace
// has it, as the c10d::* op around it would count each collective twice.
std::vector<Collective> collectives_of(const std::vector<KinetoSpan>& spans) {
  std::map<std::string, std::vector<const KinetoSpan*>> calls;
  std::map<std::string, std::vector<const KinetoSpan*>> works;
  bool param_comms = false;
  for (const KinetoSpan& s : spans) param_comms = param_comms || s.name == "record_param_comms";
  for (const KinetoSpan& s : spans) {
    if (std::string op = work_op(s); !op.empty()) {
      works[op].push_back(&s);
    } else if (param_comms ? s.name == "record_param_comms" : s.name.starts_with("c10d::")) {
      const std::string called = param_comms ? collective_op(s.collective) : call_op(s);
      if (!called.empty()) calls[called].push_back(&s);
    }
  }
  std::vector<Collective> out;
  std::set<std::string> ops;
  for (const auto& [op, list] : calls) ops.insert(op);
  for (const auto& [op, list] : works) ops.insert(op);
  for (const std::string& op : ops) {
    const std::vector<const KinetoSpan*>& c = calls[op];
    const std::vector<const KinetoSpan*>& w = works[op];
    for (size_t n = 0; n < std::max(c.size(), w.size()); ++n) {
      const KinetoSpan* call = n < c.size() ? c[n] : nullptr;
      const KinetoSpan* work = n < w.size() ? w[n] : nullptr;
      const KinetoSpan& timed = work != nullptr ? *work : *call;
      Collective coll{
          .op = op,
          .bytes = work != nullptr && work->bytes != 0 ? work->bytes : (call != nullptr ? call->bytes : 0),
          .launched_ns = call != nullptr ? std::min(call->start_ns, timed.start_ns) : timed.start_ns,
          .start_ns = timed.start_ns,
          .end_ns = timed.end_ns};
      out.push_back(std::move(coll));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Collective& a, const Collective& b) { return a.launched_ns < b.launched_ns; });
  return out;
}

struct Step {
  int64_t number = 0;  // N of ProfilerStep#N
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Where forward, backward and optimizer begin; -1 when the trace shows no sign of that phase.
  int64_t forward_ns = -1;
  int64_t backward_ns = -1;
  int64_t optimizer_ns = -1;
};

// The ProfilerStep#N spans of the main thread, with where each phase begins.
std::vector<Step> steps_of(const KinetoFile& k) {
  std::vector<Step> steps;
  for (const KinetoSpan& s : k.spans) {
    if (!s.name.starts_with(kStepPrefix)) continue;
    const std::string_view digits = std::string_view(s.name).substr(kStepPrefix.size());
    int64_t n = -1;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (r.ec != std::errc() || r.ptr != digits.data() + digits.size() || n < 0 ||
        n > std::numeric_limits<int32_t>::max())
      throw Error(ErrorKind::kFormat,
                  fmt::format("{}: '{}' has no step number (ProfilerStep#N, N from 0 to {})", k.path.string(),
                              s.name, std::numeric_limits<int32_t>::max()));
    if (!steps.empty() && s.start_ns < steps.back().end_ns)
      throw Error(ErrorKind::kFormat,
                  fmt::format("{}: '{}' starts before ProfilerStep#{} ends: the steps overlap",
                              k.path.string(), s.name, steps.back().number));
    if (!steps.empty() && n <= steps.back().number)
      throw Error(ErrorKind::kFormat,
                  fmt::format("{}: '{}' comes after ProfilerStep#{}: step numbers must grow", k.path.string(),
                              s.name, steps.back().number));
    steps.push_back(Step{.number = n, .start_ns = s.start_ns, .end_ns = s.end_ns});
  }
  if (steps.empty())
    throw Error(
        ErrorKind::kFormat,
        fmt::format("{}: no ProfilerStep#N span: profile with a schedule and call prof.step() after every "
                    "training step, so that dpscope can tell the steps apart",
                    k.path.string()));
  size_t at = 0;
  for (const KinetoSpan& s : k.spans) {
    while (at < steps.size() && s.start_ns >= steps[at].end_ns) ++at;
    if (at == steps.size()) break;
    Step& step = steps[at];
    if (s.start_ns < step.start_ns || s.kernel) continue;
    auto first = [&](int64_t& at_ns, bool matches) {
      if (matches && at_ns < 0) at_ns = s.start_ns;
    };
    first(step.forward_ns, s.name == "DistributedDataParallel.forward" || s.name.starts_with("nn.Module: "));
    first(step.backward_ns, s.name.starts_with("autograd::engine::evaluate_function: "));
    first(step.optimizer_ns, s.name.starts_with("Optimizer.step#"));
  }
  return steps;
}

// A phase span of a step: the phases that the trace shows tile the step, each from where it begins
// to where the next one does (a phase found out of order is dropped).
struct PhaseSpan {
  const char* phase;
  int64_t start_ns;
  int64_t end_ns;
};

std::vector<PhaseSpan> phases_of(const Step& step) {
  std::vector<PhaseSpan> phases;
  const std::pair<const char*, int64_t> begins[] = {
      {"forward", step.forward_ns}, {"backward", step.backward_ns}, {"optimizer", step.optimizer_ns}};
  int64_t at = step.start_ns;
  const char* phase = "data";
  for (const auto& [next, start] : begins) {
    if (start < at) continue;  // not in the trace, or before the phase it follows
    if (start > at) phases.push_back({phase, at, start});
    phase = next;
    at = start;
  }
  if (step.end_ns > at || phases.empty()) phases.push_back({phase, at, step.end_ns});
  return phases;
}

// ---- writing the dpscope lines ----

// One output event, before sorting by time.
struct Line {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  std::string text;  // the whole line, "\n" included
};

struct Context {
  const std::vector<Step>* steps = nullptr;
  std::vector<std::vector<PhaseSpan>> phases;  // by step
  int64_t first_number = 0;                    // N of the run's first ProfilerStep (dpscope step 0)
  int64_t origin_ns = 0;                       // wall-clock time that is 0 in the output
  int rank = 0;

  // The step and phase a time falls in; nullopt outside every step.
  std::optional<std::pair<int64_t, const char*>> locate(int64_t ns) const {
    for (size_t s = 0; s < steps->size(); ++s) {
      const Step& step = (*steps)[s];
      if (ns < step.start_ns || ns >= step.end_ns) continue;
      const char* phase = "none";
      for (const PhaseSpan& p : phases[s])
        if (ns >= p.start_ns && ns < p.end_ns) phase = p.phase;
      return std::make_pair(step.number - first_number, phase);
    }
    return std::nullopt;
  }

  // `{"type":TYPE,"ts":..,"rank":..,"dev":0,"step":..,"phase":..` of an event at `ns`.
  void begin(fmt::memory_buffer& out, std::string_view type, int64_t ns, int64_t step,
             const char* phase) const {
    fmt::format_to(std::back_inserter(out),
                   R"({{"type":"{}","ts":{},"rank":{},"dev":0,"step":{},"phase":"{}")", type, ns - origin_ns,
                   rank, step, phase);
  }
};

Line span_line(const Context& c, int64_t step, const char* phase, std::string_view name, std::string_view cat,
               std::string_view stream, int64_t start_ns, int64_t end_ns, std::string_view args) {
  fmt::memory_buffer out;
  c.begin(out, "span", start_ns, step, phase);
  append_raw(out, R"(,"name":)");
  append_json_string(out, name);
  fmt::format_to(std::back_inserter(out), R"(,"cat":"{}","stream":"{}","dur":{})", cat, stream,
                 end_ns - start_ns);
  if (!args.empty()) fmt::format_to(std::back_inserter(out), R"(,"args":{{{}}})", args);
  append_raw(out, "}\n");
  return Line{start_ns, end_ns - start_ns, fmt::to_string(out)};
}

Line instant_line(const Context& c, int64_t step, const char* phase, std::string_view name, int64_t ns,
                  std::string_view args) {
  fmt::memory_buffer out;
  c.begin(out, "instant", ns, step, phase);
  fmt::format_to(std::back_inserter(out), R"(,"name":"{}","args":{{{}}}}})", name, args);
  append_raw(out, "\n");
  return Line{ns, 0, fmt::to_string(out)};
}

// The main thread's spans directly inside a ProfilerStep (zero_grad, DDP's forward, each autograd
// function, Optimizer.step, ...) as compute spans: one per top-level op keeps a step to a few dozen
// lines. A span that crosses a phase boundary is left out, so that the lane stays properly nested.
void compute_lines(const Context& c, const KinetoFile& k, int64_t main_tid, std::vector<Line>& lines) {
  const std::vector<Step>& steps = *c.steps;
  size_t at = 0;
  int64_t last_end = std::numeric_limits<int64_t>::min();
  for (const KinetoSpan& s : k.spans) {
    if (s.tid != main_tid || s.kernel || s.name.starts_with(kStepPrefix)) continue;
    while (at < steps.size() && s.start_ns >= steps[at].end_ns) ++at;
    if (at == steps.size()) break;
    const Step& step = steps[at];
    if (s.start_ns < step.start_ns || s.start_ns < last_end) continue;  // outside a step, or nested deeper
    const int64_t end = std::min(s.end_ns, step.end_ns);
    last_end = end;
    bool crosses = false;
    const char* phase = "none";
    for (const PhaseSpan& p : c.phases[at]) {
      if (s.start_ns >= p.start_ns && s.start_ns < p.end_ns) {
        phase = p.phase;
        crosses = end > p.end_ns;
      }
    }
    if (crosses) continue;
    lines.push_back(
        span_line(c, step.number - c.first_number, phase, s.name, "compute", "compute", s.start_ns, end, ""));
  }
}

struct RankLines {
  std::vector<Line> lines;
  KinetoRankSummary summary;
};

RankLines convert_rank(const KinetoFile& k, const std::vector<Step>& steps, int64_t first_number,
                       int64_t origin_ns) {
  RankLines out;
  Context c{.steps = &steps, .first_number = first_number, .origin_ns = origin_ns, .rank = k.rank};
  for (const Step& s : steps) c.phases.push_back(phases_of(s));
  std::vector<Line>& lines = out.lines;
  const bool cuda = std::any_of(k.spans.begin(), k.spans.end(), [](const KinetoSpan& s) { return s.kernel; });

  for (size_t s = 0; s < steps.size(); ++s)
    for (const PhaseSpan& p : c.phases[s])
      lines.push_back(span_line(c, steps[s].number - first_number, p.phase, p.phase, "phase", "compute",
                                p.start_ns, p.end_ns, ""));
  int64_t main_tid = -1;
  for (const KinetoSpan& s : k.spans)
    if (s.name.starts_with(kStepPrefix)) {
      main_tid = s.tid;
      break;
    }
  if (!cuda) compute_lines(c, k, main_tid, lines);

  // Collectives on the comm lane. gloo runs a process group's collectives on two threads, so two
  // may overlap: the later one is drawn from the earlier one's end (args.overlap_ns says by how
  // much it began earlier), which keeps the lane properly nested.
  const std::vector<Collective> colls = collectives_of(k.spans);
  int64_t comm_free_ns = std::numeric_limits<int64_t>::min();
  std::vector<std::vector<std::pair<const Collective*, int>>> backward_reduces(steps.size());  // (coll, seq)
  int seq = 0;
  for (const Collective& coll : colls) {
    const auto where = c.locate(coll.launched_ns);
    if (!where) continue;  // launched outside the profiled steps
    const int64_t start = std::max(coll.start_ns, std::min(comm_free_ns, coll.end_ns));
    std::string args = fmt::format(R"("coll":{},"op":"{}","bytes":{})", seq, coll.op, coll.bytes);
    if (start > coll.start_ns) args += fmt::format(R"(,"overlap_ns":{})", start - coll.start_ns);
    const std::string name =
        coll.bytes != 0 ? fmt::format("{} {}", coll.op, format_bytes(coll.bytes)) : coll.op;
    const auto phase_at = c.locate(start);
    lines.push_back(span_line(c, where->first, phase_at ? phase_at->second : where->second, name,
                              "collective", "comm", start, coll.end_ns, args));
    comm_free_ns = std::max(comm_free_ns, coll.end_ns);
    ++out.summary.collectives;
    if (coll.op == "all_reduce" && std::string_view(where->second) == "backward") {
      for (size_t s = 0; s < steps.size(); ++s)
        if (steps[s].number - first_number == where->first) backward_reduces[s].emplace_back(&coll, seq);
    }
    ++seq;
  }

  // Buckets: the all-reduces that backward launches, in order, are DDP's buckets (bucket 0 first).
  // A `buckets` event whenever the sizes differ from the step before; a bucket's params are not in
  // the profile and stay empty.
  std::vector<uint64_t> previous;
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto& reduces = backward_reduces[s];
    if (reduces.empty()) continue;
    std::vector<uint64_t> sizes;
    for (const auto& [coll, unused] : reduces) sizes.push_back(coll->bytes);
    const int64_t step = steps[s].number - first_number;
    if (sizes != previous) {
      fmt::memory_buffer b;
      c.begin(b, "buckets", steps[s].backward_ns, step, "backward");
      fmt::format_to(std::back_inserter(b), R"(,"reason":"{}","buckets":[)",
                     previous.empty() ? "initial" : "rebuilt");
      for (size_t i = 0; i < sizes.size(); ++i)
        fmt::format_to(std::back_inserter(b), R"({}{{"id":{},"params":[],"bytes":{}}})", i == 0 ? "" : ",", i,
                       sizes[i]);
      append_raw(b, "]}\n");
      lines.push_back(Line{steps[s].backward_ns, 0, fmt::to_string(b)});
      ++out.summary.bucket_assignments;
      previous = sizes;
    }
    for (size_t i = 0; i < reduces.size(); ++i) {
      const Collective& coll = *reduces[i].first;
      const std::string args = fmt::format(R"("bucket":{},"bytes":{})", i, coll.bytes);
      lines.push_back(instant_line(c, step, "backward", "bucket_launched", coll.launched_ns, args));
      const auto done_at = c.locate(coll.end_ns);
      lines.push_back(
          instant_line(c, step, done_at ? done_at->second : "backward", "bucket_done", coll.end_ns, args));
    }
  }

  // Gradient-ready: the end of each AccumulateGrad (the autograd engine's, else the op's own). Which
  // parameter it was the profile does not say: param -1.
  const bool engine = std::any_of(k.spans.begin(), k.spans.end(),
                                  [](const KinetoSpan& s) { return s.name == kAccumulateGrad; });
  for (const KinetoSpan& s : k.spans) {
    if (s.name != (engine ? kAccumulateGrad : kAccumulateGradInner)) continue;
    const auto where = c.locate(s.end_ns);
    if (!where) continue;
    lines.push_back(instant_line(c, where->first, where->second, "grad_ready", s.end_ns, R"("param":-1)"));
    ++out.summary.grad_ready;
  }

  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
  });
  out.summary.source = k.path;
  out.summary.rank = k.rank;
  out.summary.world_size = k.world_size;
  out.summary.first_profiler_step = first_number;
  out.summary.steps = static_cast<int>(steps.size());
  out.summary.events = lines.size();
  return out;
}

std::string header_line(const KinetoFile& k, int64_t first_number, int64_t origin_ns, bool process) {
  fmt::memory_buffer out;
  append_raw(out, R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"measured","run":{)");
  append_raw(out, R"("source":"torch.profiler","kineto_file":)");
  append_json_string(out, k.path.filename().string());
  append_raw(out, R"(,"backend":)");
  append_json_string(out, k.backend.empty() ? "none" : k.backend);
  fmt::format_to(std::back_inserter(out), R"(,"rank":{},"world_size":{},"first_profiler_step":{})", k.rank,
                 k.world_size, first_number);
  if (!k.host.empty()) {
    append_raw(out, R"(,"host":)");
    append_json_string(out, k.host);
  }
  fmt::format_to(std::back_inserter(out), R"(,"clock_origin_unix_ns":{})", origin_ns);
  if (process)
    fmt::format_to(std::back_inserter(out),
                   R"(,"process":{{"rank":{},"world_size":{},"clock_offset_ns":0,"clock_uncertainty_ns":0}})",
                   k.rank, k.world_size);
  append_raw(out, R"(},"devices":[)");
  // The GPU this rank's kernels ran on, else the CPU.
  int gpu = -1;
  for (const KinetoSpan& s : k.spans)
    if (s.kernel && s.device >= 0) {
      gpu = s.device;
      break;
    }
  if (gpu >= 0) {
    std::string hardware;
    uint64_t memory = 0;
    for (const CudaDevice& d : k.cuda_devices)
      if (d.id == gpu) {
        hardware = d.name;
        memory = d.memory_bytes;
      }
    fmt::format_to(std::back_inserter(out), R"({{"id":0,"name":"cuda:{}","kind":"cuda","hardware":)", gpu);
    append_json_string(out, hardware);
    fmt::format_to(std::back_inserter(out), R"(,"memory_bytes":{},"peak_flops":0,"mem_bandwidth":0}})",
                   memory);
  } else {
    append_raw(
        out,
        R"({"id":0,"name":"cpu","kind":"cpu","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0})");
  }
  append_raw(out, R"(],"links":[],"params":[],"buckets":[]})"
                  "\n");
  return fmt::to_string(out);
}

void write_trace(const std::filesystem::path& path, const std::string& header,
                 const std::vector<Line>& lines) {
  AtomicFileWriter writer(path);
  std::string text = header;
  for (const Line& l : lines) text += l.text;
  writer.write(text);
  writer.commit();
}

bool is_gzip_name(const std::filesystem::path& p) { return p.filename().string().ends_with(".json.gz"); }

}  // namespace

// ---- the files IN names and the run they make ----

std::vector<std::filesystem::path> list_kineto_files(const std::filesystem::path& in) {
  const PathStatus status = path_status(in);
  if (status.kind != FileKind::kDirectory) {
    if (const std::string why = why_not_readable(in); !why.empty())
      throw Error(ErrorKind::kIo, fmt::format("cannot read torch.profiler trace '{}': {}", in.string(), why));
    if (is_gzip_name(in))
      throw Error(
          ErrorKind::kUnsupported,
          fmt::format("{}: a gzip-compressed trace; dpscope reads plain JSON: gunzip it first", in.string()));
    return {in};
  }
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(in, ec)) {
    const std::filesystem::path& p = entry.path();
    if (is_gzip_name(p))
      throw Error(
          ErrorKind::kUnsupported,
          fmt::format("{}: a gzip-compressed trace; dpscope reads plain JSON: gunzip it first", p.string()));
    if (p.extension() == ".json") files.push_back(p);
  }
  if (ec)
    throw Error(ErrorKind::kIo, fmt::format("cannot list directory '{}': {}", in.string(), ec.message()));
  if (files.empty())
    throw Error(ErrorKind::kFormat,
                fmt::format("{}: no torch.profiler trace (*.json) in this directory", in.string()));
  std::sort(files.begin(), files.end());
  return files;
}

KinetoImportResult import_kineto(const std::filesystem::path& in, const std::filesystem::path& out) {
  const std::vector<std::filesystem::path> files = list_kineto_files(in);
  KinetoImportResult result;
  result.directory = files.size() > 1;
  std::vector<KinetoFile> traces;
  for (const std::filesystem::path& f : files) traces.push_back(parse_kineto(f));

  if (result.directory) {
    // One run's ranks: each file says its rank, the ranks are those of one world size, each once.
    std::map<int, const KinetoFile*> by_rank;
    for (const KinetoFile& k : traces) {
      DPS_CHECK(k.distributed, ErrorKind::kFormat,
                "{}: no 'distributedInfo' (rank, world_size): in a directory of several traces each must say "
                "its rank",
                k.path.string());
      DPS_CHECK(k.world_size == traces.front().world_size, ErrorKind::kFormat,
                "{}: its world_size is {}, but {} says {}: the traces are not of one run", k.path.string(),
                k.world_size, traces.front().path.string(), traces.front().world_size);
      const auto [it, fresh] = by_rank.emplace(k.rank, &k);
      DPS_CHECK(fresh, ErrorKind::kFormat,
                "{}: a second trace of rank {} (the other is {}): import one profiling cycle at a time",
                k.path.string(), k.rank, it->second->path.string());
    }
    for (int r = 0; r < traces.front().world_size; ++r)
      DPS_CHECK(by_rank.count(r) != 0, ErrorKind::kFormat, "{}: no trace of rank {} (the run has {} ranks)",
                in.string(), r, traces.front().world_size);
    std::sort(traces.begin(), traces.end(),
              [](const KinetoFile& a, const KinetoFile& b) { return a.rank < b.rank; });
    // OUT may already hold rank files; those of ranks this run does not have would join it.
    if (path_status(out).kind == FileKind::kDirectory) {
      for (const auto& [rank, file] : list_rank_files(out))
        DPS_CHECK(rank < traces.front().world_size && file.extension() == ".jsonl", ErrorKind::kUsage,
                  "OUT '{}' already holds {}, which this import would not replace: choose an empty directory",
                  out.string(), file.filename().string());
    }
  }

  std::vector<std::vector<Step>> steps;
  int64_t first_number = std::numeric_limits<int64_t>::max();
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const KinetoFile& k : traces) {
    steps.push_back(steps_of(k));
    first_number = std::min(first_number, steps.back().front().number);
    origin_ns = std::min(origin_ns, steps.back().front().start_ns);
  }
  // Every rank converted, and every file it goes to checked, before the first is written: an import
  // refused half-way replaced OUT/rank-0.jsonl of an earlier run and then stopped at rank-1.jsonl (a
  // directory there), leaving OUT a mix of two runs.
  std::vector<RankLines> converted;
  for (size_t i = 0; i < traces.size(); ++i) {
    converted.push_back(convert_rank(traces[i], steps[i], first_number, origin_ns));
    RankLines& r = converted.back();
    r.summary.written = result.directory ? out / fmt::format("rank-{}.jsonl", traces[i].rank) : out;
    const PathStatus target = path_status(r.summary.written);
    DPS_CHECK(target.kind == FileKind::kMissing || target.kind == FileKind::kRegular, ErrorKind::kUsage,
              "{}: {}; refusing to write over it", r.summary.written.string(),
              target.kind == FileKind::kDirectory ? "is a directory" : why_not_regular(target));
  }
  if (result.directory) {
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec)
      throw Error(ErrorKind::kIo,
                  fmt::format("cannot create OUT directory '{}': {}", out.string(), ec.message()));
  }
  for (size_t i = 0; i < traces.size(); ++i) {
    write_trace(converted[i].summary.written,
                header_line(traces[i], first_number, origin_ns, result.directory), converted[i].lines);
    result.ranks.push_back(std::move(converted[i].summary));
  }
  return result;
}

}  // namespace dpscope::trace
