// TraceRecorder: JSON Lines trace writer (format in docs/trace-format.md).
#include "dpscope/trace/recorder.hpp"

#include <cmath>
#include <concepts>
#include <variant>

#include "background_writer.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {

int add_trace_device(TraceHeader& header, const Device& device) {
  TraceDeviceInfo info;
  info.id = static_cast<int>(header.devices.size());
  info.name = device.name();
  const HardwarePreset* hw = device.hardware();
  switch (device.kind()) {
    case DeviceKind::kCpu: info.kind = "cpu"; break;
    case DeviceKind::kSim: info.kind = "sim"; break;
    case DeviceKind::kCuda: info.kind = "cuda"; break;
  }
  if (hw != nullptr) {
    info.hardware = hw->name;
    info.memory_bytes = hw->memory_bytes;
    info.peak_flops = hw->peak_flops;
    info.mem_bandwidth_bytes_per_s = hw->mem_bandwidth_bytes_per_s;
  }
  header.devices.push_back(info);
  if (device.is_gpu() && hw != nullptr) {
    if (header.host_id < 0) {
      // The host appears once, after the first GPU (simulated or cuda: copies to and from it are
      // drawn the same way).
      header.host_id = static_cast<int>(header.devices.size());
      header.devices.push_back({.id = header.host_id, .name = "host", .kind = "host"});
    }
    // GPU-GPU links depend on the topology: add_network_links (comm/network.hpp) adds them.
    header.links.push_back({info.id, header.host_id, hw->host_link.kind, hw->host_link.bandwidth_bytes_per_s,
                            hw->host_link.latency_ns});
  }
  return info.id;
}

namespace {

// The header's "cluster" object (docs/trace-format.md "The cluster"), after a `,`.
void append_trace_cluster(fmt::memory_buffer& out, const TraceClusterInfo& c) {
  auto it = fmt::appender(out);
  fmt::format_to(it, R"(,"cluster":{{"nodes":{},"gpus_per_node":{},"intra":{{"topology":)", c.nodes,
                 c.gpus_per_node);
  append_json_string(out, c.intra_topology);
  append_raw(out, R"(,"link":)");
  append_json_string(out, c.intra_link);
  append_raw(out, R"(,"bandwidth":)");
  append_json_number(out, c.intra_bandwidth_bytes_per_s);
  append_raw(out, R"(,"latency_ns":)");
  append_json_number(out, c.intra_latency_ns);
  fmt::format_to(it, R"(}},"rails":{{"per_node":{},"kind":)", c.rails_per_node);
  append_json_string(out, c.rail_kind);
  append_raw(out, R"(,"bandwidth":)");
  append_json_number(out, c.rail_bandwidth_bytes_per_s);
  append_raw(out, R"(,"latency_ns":)");
  append_json_number(out, c.rail_latency_ns);
  append_raw(out, "}}");
}

}  // namespace

void append_trace_header(fmt::memory_buffer& out, const TraceHeader& h) {
  auto it = fmt::appender(out);
  fmt::format_to(it, R"({{"type":"header","format":"{}","version":"{}.{}","clock":)", kTraceFormatName,
                 kTraceFormatMajor, kTraceFormatMinor);
  append_json_string(out, h.clock);
  fmt::format_to(it, R"(,"run":{},"devices":[)", h.run_json.empty() ? "{}" : h.run_json);
  for (size_t i = 0; i < h.devices.size(); ++i) {
    const TraceDeviceInfo& d = h.devices[i];
    fmt::format_to(it, R"({}{{"id":{},"name":)", i ? "," : "", d.id);
    append_json_string(out, d.name);
    append_raw(out, R"(,"kind":)");
    append_json_string(out, d.kind);
    append_raw(out, R"(,"hardware":)");
    append_json_string(out, d.hardware);
    fmt::format_to(it, R"(,"memory_bytes":{},"peak_flops":)", d.memory_bytes);
    append_json_number(out, d.peak_flops);
    append_raw(out, R"(,"mem_bandwidth":)");
    append_json_number(out, d.mem_bandwidth_bytes_per_s);
    out.push_back('}');
  }
  append_raw(out, R"(],"links":[)");
  for (size_t i = 0; i < h.links.size(); ++i) {
    const TraceLinkInfo& l = h.links[i];
    fmt::format_to(it, R"({}{{"src":{},"dst":{},"kind":)", i ? "," : "", l.src, l.dst);
    append_json_string(out, l.kind);
    append_raw(out, R"(,"bandwidth":)");
    append_json_number(out, l.bandwidth_bytes_per_s);
    append_raw(out, R"(,"latency_ns":)");
    append_json_number(out, l.latency_ns);
    out.push_back('}');
  }
  append_raw(out, R"(],"params":[)");
  for (size_t i = 0; i < h.params.size(); ++i) {
    const TraceParamInfo& p = h.params[i];
    fmt::format_to(it, R"({}{{"index":{},"name":)", i ? "," : "", p.index);
    append_json_string(out, p.name);
    fmt::format_to(it, R"(,"shape":[{}],"bytes":{}}})", fmt::join(p.shape, ","), p.bytes);
  }
  append_raw(out, R"(],"buckets":[)");
  for (size_t i = 0; i < h.buckets.size(); ++i) {
    const TraceBucketInfo& b = h.buckets[i];
    fmt::format_to(it, R"({}{{"id":{},"params":[{}],"bytes":{}}})", i ? "," : "", b.id,
                   fmt::join(b.params, ","), b.bytes);
  }
  out.push_back(']');
  if (h.cluster) append_trace_cluster(out, *h.cluster);
  append_raw(out, "}\n");
}

namespace {

// `key` (the literal `,"key":`) and an integer.
template <std::integral T>
void put_int(fmt::memory_buffer& out, std::string_view key, T value) {
  append_raw(out, key);
  append_json_int(out, value);
}

// `key` (the literal `,"key":"`), a vocabulary name (a constant: nothing to escape) and its quote.
void put_name(fmt::memory_buffer& out, std::string_view key, std::string_view name) {
  append_raw(out, key);
  append_raw(out, name);
  out.push_back('"');
}

// A span's `args` object (nothing for NoArgs), keys in the order docs/trace-format.md shows.
void write_span_args(fmt::memory_buffer& out, const SpanArgs& args) {
  auto it = fmt::appender(out);
  struct Writer {
    fmt::memory_buffer& out;
    fmt::appender it;
    void operator()(const NoArgs&) const {}
    void operator()(const KernelArgs& a) const {
      append_raw(out, R"(,"args":{"flops":)");
      append_json_number(out, a.flops);
      append_raw(out, R"(,"bytes":)");
      append_json_number(out, a.bytes);
      out.push_back('}');
    }
    void operator()(const CollectiveArgs& a) const {
      fmt::format_to(it,
                     R"(,"args":{{"coll":{},"group":{},"op":"{}","algo":"{}","bytes":{},"count":{},)"
                     R"("dtype":"{}","redop":"{}","root":{},"ranks":{},"slices":{},"steps":{})",
                     a.coll, a.group, a.op, a.algo, a.bytes, a.count, a.dtype, a.redop, a.root, a.ranks,
                     a.slices, a.steps);
      if (!a.error.empty()) {
        append_raw(out, R"(,"error":)");
        append_json_string(out, a.error);
      }
      if (a.phases) {
        const CollectivePhases& p = *a.phases;
        fmt::format_to(it,
                       R"(,"phase_rs_start_ns":{},"phase_rs_dur_ns":{},"phase_net_start_ns":{},)"
                       R"("phase_net_dur_ns":{},"phase_ag_start_ns":{},"phase_ag_dur_ns":{})",
                       p.rs_start_ns, p.rs_dur_ns, p.net_start_ns, p.net_dur_ns, p.ag_start_ns, p.ag_dur_ns);
      }
      out.push_back('}');
    }
    void operator()(const ReduceArgs& a) const {
      fmt::format_to(it, R"(,"args":{{"coll":{},"bytes":{},"src_rank":{}}})", a.coll, a.bytes, a.src_rank);
    }
    void operator()(const AvgScaleArgs& a) const {
      fmt::format_to(it, R"(,"args":{{"coll":{},"bytes":{},"divisor":{}}})", a.coll, a.bytes, a.divisor);
    }
  };
  std::visit(Writer{out, it}, args);
}

// An instant's `args` object.
void write_instant_args(fmt::memory_buffer& out, const InstantPayload& payload) {
  auto it = fmt::appender(out);
  struct Writer {
    fmt::memory_buffer& out;
    fmt::appender it;
    void operator()(const GradReady& a) const {
      put_int(out, R"(,"args":{"param":)", a.param);
      out.push_back('}');
    }
    void operator()(const BucketLaunched& a) const { bucket(a.bucket, a.bytes, a.params); }
    void operator()(const BucketDone& a) const { bucket(a.bucket, a.bytes, a.params); }
    void operator()(const WorkCompleted& a) const {
      fmt::format_to(it, R"(,"args":{{"coll":{},"op":"{}","group":{}}})", a.coll, a.op, a.group);
    }
    void operator()(const CheckpointSaved& a) const {
      fmt::format_to(it, R"(,"args":{{"steps_done":{}}})", a.steps_done);
    }
    void operator()(const RunError& a) const {
      append_raw(out, R"(,"args":{"message":)");
      append_json_string(out, a.message);
      out.push_back('}');
    }
    void bucket(int id, uint64_t bytes, uint64_t params) const {
      fmt::format_to(it, R"(,"args":{{"bucket":{},"bytes":{},"params":{}}})", id, bytes, params);
    }
  };
  std::visit(Writer{out, it}, payload);
}

}  // namespace

std::unique_ptr<TraceRecorder> TraceRecorder::open(const std::filesystem::path& path,
                                                   const TraceHeader& header,
                                                   std::span<const Device> devices) {
  DPS_ASSERT(devices.size() <= header.devices.size(), "trace header lists {} devices but {} were given",
             header.devices.size(), devices.size());
  auto file = std::make_unique<trace::TraceFileWriter>(path, trace::names_zstd_file(path));
  std::unique_ptr<TraceRecorder> recorder(new TraceRecorder(path, std::move(file), header.host_id));
  fmt::memory_buffer line;
  append_trace_header(line, header);
  recorder->commit(line);
  recorder->flush();
  for (const Device& device : devices) {
    // The id is the header entry of the same name (the host entry shifts positions).
    int id = -1;
    for (const TraceDeviceInfo& info : header.devices)
      if (info.name == device.name()) id = info.id;
    DPS_ASSERT(id >= 0, "device {} is not in the trace header; add it with add_trace_device", device.name());
    device.attach_tracer(recorder.get(), id);
  }
  recorder->devices_.assign(devices.begin(), devices.end());
  return recorder;
}

TraceRecorder::TraceRecorder(std::filesystem::path path, std::unique_ptr<trace::TraceFileWriter> file,
                             int host_id)
    : path_(std::move(path)),
      writer_(std::make_unique<trace::BackgroundWriter>(std::move(file))),
      host_id_(host_id) {}

TraceRecorder::~TraceRecorder() {
  try {
    close();
  } catch (...) {
    // Destructors must not throw; close() already reported what it could.
  }
}

void TraceRecorder::begin_event(fmt::memory_buffer& out, EventType type, const Device& device,
                                int64_t ts_ns) const {
  // Written piece by piece, not through a format string: every event starts here, and a traced
  // kernel's line is written on the thread that launched it.
  const TraceContext stamp = device.trace_stamp();
  append_raw(out, R"({"type":")");
  append_raw(out, to_string(type));
  put_int(out, R"(","ts":)", ts_ns);
  put_int(out, R"(,"rank":)", stamp.rank);
  put_int(out, R"(,"dev":)", stamp.trace_id);
  put_int(out, R"(,"step":)", stamp.step);
  put_name(out, R"(,"phase":")", to_string(stamp.phase));
}

void TraceRecorder::commit(const fmt::memory_buffer& line) {
  std::lock_guard lock(mutex_);
  pending_.append(line.data(), line.size());
  events_.fetch_add(1, std::memory_order_relaxed);
  // Lines pile up between flushes: a MiB at a time goes to the writer (written, not flushed).
  if (pending_.size() > (1u << 20) && writer_ != nullptr) writer_->hand_off(pending_, /*flush=*/false);
}

void TraceRecorder::kernel_span(const Device& device, StreamKind stream, std::string_view name, int64_t ts_ns,
                                int64_t dur_ns, KernelCost cost) {
  span(device, {.stream = stream,
                .cat = kernel_category(stream),
                .name = name,
                .ts_ns = ts_ns,
                .dur_ns = dur_ns,
                .args = KernelArgs{.flops = cost.flops, .bytes = cost.bytes}});
}

void TraceRecorder::span(const Device& device, const SpanEvent& span) {
  fmt::memory_buffer out;
  begin_event(out, EventType::kSpan, device, span.ts_ns);
  append_raw(out, R"(,"name":)");
  append_json_string(out, span.name);
  put_name(out, R"(,"cat":")", to_string(span.cat));
  put_name(out, R"(,"stream":")", to_string(span.stream));
  put_int(out, R"(,"dur":)", span.dur_ns);
  write_span_args(out, span.args);
  append_raw(out, "}\n");
  commit(out);
}

void TraceRecorder::instant(const Device& device, int64_t ts_ns, const InstantPayload& payload) {
  fmt::memory_buffer out;
  begin_event(out, EventType::kInstant, device, ts_ns);
  put_name(out, R"(,"name":")", to_string(instant_name(payload)));
  write_instant_args(out, payload);
  append_raw(out, "}\n");
  commit(out);
}

void TraceRecorder::counter(const Device& device, EventName name, int64_t ts_ns,
                            std::span<const std::pair<std::string_view, double>> values) {
  fmt::memory_buffer out;
  begin_event(out, EventType::kCounter, device, ts_ns);
  put_name(out, R"(,"name":")", to_string(name));
  append_raw(out, R"(,"values":{)");
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out.push_back(',');
    append_json_string(out, values[i].first);
    out.push_back(':');
    append_json_number(out, values[i].second);
  }
  append_raw(out, "}}\n");
  commit(out);
}

void TraceRecorder::loss_counter(const Device& device, int64_t ts_ns, double loss) {
  const std::pair<std::string_view, double> values[] = {{trace_key::kLoss, loss}};
  counter(device, EventName::kLoss, ts_ns, values);
}

void TraceRecorder::memory_counter(const Device& device, int64_t ts_ns, const MemoryStats& memory) {
  std::pair<std::string_view, double> values[kMemoryCategoryCount + 1];
  for (int c = 0; c < kMemoryCategoryCount; ++c)
    values[c] = {to_string(static_cast<MemoryCategory>(c)), static_cast<double>(memory.bytes[c])};
  values[kMemoryCategoryCount] = {trace_key::kCapacity, static_cast<double>(memory.capacity_bytes)};
  counter(device, EventName::kMemory, ts_ns, values);
}

uint64_t TraceRecorder::transfer(const Device& device, const TraceTransfer& t) {
  const uint64_t flow = next_flow_.fetch_add(1, std::memory_order_relaxed);
  fmt::memory_buffer out;
  begin_event(out, EventType::kTransfer, device, t.ts_ns);
  append_raw(out, R"(,"name":)");
  append_json_string(out, t.name);
  put_name(out, R"(,"stream":")", to_string(t.stream));
  put_int(out, R"(,"dur":)", t.dur_ns);
  put_int(out, R"(,"src":)", t.src);
  put_int(out, R"(,"dst":)", t.dst);
  put_int(out, R"(,"bytes":)", t.bytes);
  put_int(out, R"(,"flow":)", flow);
  if (t.collective >= 0) {
    put_int(out, R"(,"coll":)", t.collective);
    append_raw(out, R"(,"algo":)");
    append_json_string(out, t.algo);
    put_int(out, R"(,"algo_step":)", t.algo_step);
    put_int(out, R"(,"chunk":)", t.chunk);
  }
  // Written only when set (TraceTransfer): the device ids of that end live in rank R's own file.
  if (t.src_rank >= 0) {
    put_int(out, R"(,"src_rank":)", t.src_rank);
  }
  if (t.dst_rank >= 0) {
    put_int(out, R"(,"dst_rank":)", t.dst_rank);
  }
  append_raw(out, "}\n");
  commit(out);
  return flow;
}

void TraceRecorder::copy_transfer(const Device& src, const Device& dst, int64_t ts_ns, int64_t dur_ns,
                                  uint64_t bytes) {
  const int src_id = src.is_gpu() ? src.trace_id() : host_id_;
  const int dst_id = dst.is_gpu() ? dst.trace_id() : host_id_;
  const Device& issuer = dst.is_gpu() ? dst : src;
  const EventName name =
      !src.is_gpu() ? EventName::kCopyH2D : (!dst.is_gpu() ? EventName::kCopyD2H : EventName::kCopyD2D);
  transfer(issuer, {.src = src_id,
                    .dst = dst_id,
                    .bytes = bytes,
                    .ts_ns = ts_ns,
                    .dur_ns = dur_ns,
                    .stream = StreamKind::kCopy,
                    .name = to_string(name)});
}

void TraceRecorder::values(const Device& device, int64_t ts_ns, const ValuesEvent& v) {
  fmt::memory_buffer out;
  begin_event(out, EventType::kValues, device, ts_ns);
  fmt::format_to(fmt::appender(out), R"(,"name":"{}","param":{},"when":"{}","values":[)", to_string(v.name),
                 v.param, to_string(v.when));
  for (size_t i = 0; i < v.values.size(); ++i) {
    if (i) out.push_back(',');
    append_json_number(out, v.values[i]);
  }
  append_raw(out, R"(],"norm":)");
  append_json_number(out, v.norm);
  if (v.stride > 1) fmt::format_to(fmt::appender(out), R"(,"stride":{})", v.stride);
  append_raw(out, "}\n");
  commit(out);
}

void TraceRecorder::samples(const Device& device, int64_t ts_ns, std::span<const int64_t> indices,
                            std::optional<int64_t> epoch) {
  fmt::memory_buffer out;
  begin_event(out, EventType::kSamples, device, ts_ns);
  fmt::format_to(fmt::appender(out), R"(,"indices":[{}])", fmt::join(indices, ","));
  if (epoch) fmt::format_to(fmt::appender(out), R"(,"epoch":{})", *epoch);
  out.push_back('}');
  out.push_back('\n');
  commit(out);
}

void TraceRecorder::buckets(const Device& device, int64_t ts_ns, std::span<const TraceBucketInfo> buckets,
                            BucketReason reason) {
  fmt::memory_buffer out;
  begin_event(out, EventType::kBuckets, device, ts_ns);
  fmt::format_to(fmt::appender(out), R"(,"reason":"{}","buckets":[)", to_string(reason));
  for (size_t i = 0; i < buckets.size(); ++i) {
    const TraceBucketInfo& b = buckets[i];
    fmt::format_to(fmt::appender(out), R"({}{{"id":{},"params":[{}],"bytes":{}}})", i ? "," : "", b.id,
                   fmt::join(b.params, ","), b.bytes);
  }
  append_raw(out, "]}\n");
  commit(out);
}

void TraceRecorder::flush() {
  std::lock_guard lock(mutex_);
  if (writer_ == nullptr) return;
  writer_->wait_written(writer_->hand_off(pending_, /*flush=*/true));
}

void TraceRecorder::flush_soon() {
  std::lock_guard lock(mutex_);
  if (writer_ == nullptr) return;
  writer_->hand_off(pending_, /*flush=*/true);
  // A write that failed (disk full) ends the run at its next step, not after the last one.
  writer_->rethrow_failure();
}

void TraceRecorder::close() {
  // Detach first: a measured (cuda) device emits the spans it still holds when its tracer goes, and
  // they must reach the file.
  for (const Device& device : devices_)
    if (device.tracer() == this) device.attach_tracer(nullptr, -1);
  devices_.clear();
  std::unique_ptr<trace::BackgroundWriter> writer;
  {
    std::lock_guard lock(mutex_);
    if (writer_ == nullptr) return;
    writer_->hand_off(pending_, /*flush=*/false);
    writer = std::move(writer_);
  }
  writer->close();  // writes the rest; zstd: ends the frame; throws kWriteFailed "cannot write trace ..."
}

}  // namespace dpscope
