// Synthetic single / DataParallel / DDP traces (see synthetic_trace.hpp).
//
//   Sections: setup (devices, header, parameters) · DDP step · DP step · single step · helpers.
#include "tools/synthetic_trace.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/core/timing.hpp"

namespace dpscope::viz::tools {

const char* to_string(SyntheticMode mode) {
  switch (mode) {
    case SyntheticMode::kSingle: return "single";
    case SyntheticMode::kDataParallel: return "dp";
    case SyntheticMode::kDistributed: return "ddp";
  }
  return "?";
}

std::vector<float> synthetic_grad_values(int64_t step, int rank, int param, int count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    // Small numbers with 3 decimals, different on every rank, so averaging shows in the numbers.
    const int raw = ((rank + 1) * 37 + (i + 1) * 11 + param * 5 + static_cast<int>(step) * 3) % 200 - 100;
    v[static_cast<size_t>(i)] = static_cast<float>(raw) / 1000.0f;
  }
  return v;
}

namespace {

constexpr uint64_t kFloatBytes = 4;

struct Layer {
  int64_t in = 0;
  int64_t out = 0;
  std::string forward_name;   // "forward 0.Linear"
  std::string backward_name;  // "backward 0.Linear"
  std::string relu_forward;   // "forward 1.ReLU" (empty for the last layer)
  std::string relu_backward;
};

double l2(std::span<const float> v, uint64_t numel) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum * static_cast<double>(numel) / static_cast<double>(std::max<size_t>(v.size(), 1)));
}

// Everything one generator run shares.
class Writer {
 public:
  Writer(const std::filesystem::path& path, const SyntheticTraceOptions& options)
      : o_(options), preset_(find_preset(options.preset)) {
    DPS_CHECK(o_.devices >= 1 && o_.devices <= 64, ErrorKind::kInvalidArgument,
              "synthetic trace: devices must be 1..64, got {}", o_.devices);
    DPS_CHECK(o_.mode != SyntheticMode::kSingle || o_.devices == 1, ErrorKind::kInvalidArgument,
              "synthetic trace: single mode uses 1 device, got {}", o_.devices);
    DPS_CHECK(o_.widths.size() >= 2, ErrorKind::kInvalidArgument,
              "synthetic trace: the MLP needs at least 2 widths");
    DPS_CHECK(o_.batch >= 1 && o_.steps >= 1 && o_.dataset_len >= 1 && o_.values_per_tensor >= 1,
              ErrorKind::kInvalidArgument,
              "synthetic trace: batch, steps, dataset_len and values_per_tensor must be >= 1");
    for (size_t l = 0; l + 1 < o_.widths.size(); ++l) {
      const int idx = static_cast<int>(2 * l);
      Layer layer{o_.widths[l],
                  o_.widths[l + 1],
                  fmt::format("forward {}.Linear", idx),
                  fmt::format("backward {}.Linear", idx),
                  "",
                  ""};
      if (l + 2 < o_.widths.size()) {
        layer.relu_forward = fmt::format("forward {}.ReLU", idx + 1);
        layer.relu_backward = fmt::format("backward {}.ReLU", idx + 1);
      }
      layers_.push_back(std::move(layer));
      for (const char* kind : {"weight", "bias"}) {
        TraceParamInfo p;
        p.index = static_cast<int>(params_.size());
        p.name = fmt::format("{}.{}", idx, kind);
        p.shape = kind[0] == 'w' ? Shape{o_.widths[l + 1], o_.widths[l]} : Shape{o_.widths[l + 1]};
        p.bytes = static_cast<uint64_t>(shape_numel(p.shape)) * kFloatBytes;
        params_.push_back(p);
        info_.param_names.push_back(p.name);
      }
    }
    for (const TraceParamInfo& p : params_) param_bytes_ += p.bytes;

    TraceHeader header;
    header.run_json = fmt::format(
        R"({{"mode":"{}","backend":"sim","devices":{},"preset":"{}","model":"{}","batch":{},"steps":{},"synthetic":true}})",
        to_string(o_.mode), o_.devices, o_.preset, fmt::join(o_.widths, "-"), o_.batch, o_.steps);
    for (int r = 0; r < o_.devices; ++r) {
      gpus_.push_back(Device::sim(r, preset_));
      info_.gpu_ids.push_back(add_trace_device(header, gpus_.back()));
      gpus_.back().set_rank(r);
    }
    add_network_links(header, preset_, info_.gpu_ids);
    info_.host_id = header.host_id;
    header.params = params_;
    if (o_.mode == SyntheticMode::kDistributed) {
      // Iteration 1 of DDP (PyTorch 1.13): one bucket, parameters in reverse order.
      TraceBucketInfo all{0, {}, param_bytes_};
      for (int p = static_cast<int>(params_.size()) - 1; p >= 0; --p) all.params.push_back(p);
      info_.initial_buckets = {all};
      info_.rebuilt_buckets = rebuilt_buckets();
      header.buckets = info_.initial_buckets;
    }
    recorder_ = TraceRecorder::open(path, header, gpus_);  // attaches each GPU under its header id
    info_.samples.resize(static_cast<size_t>(o_.steps), std::vector<std::vector<int64_t>>(gpus_.size()));
  }

  SyntheticTraceInfo run() {
    for (const Device& g : gpus_) g.allocate(param_bytes_, MemoryCategory::kParameters);
    for (int64_t step = 0; step < o_.steps; ++step) {
      for (const Device& g : gpus_) g.set_step(step);
      switch (o_.mode) {
        case SyntheticMode::kDistributed: ddp_step(step); break;
        case SyntheticMode::kDataParallel: dp_step(step); break;
        case SyntheticMode::kSingle: single_step(step); break;
      }
      recorder_->flush();  // like a training loop: whole lines at least once per step
    }
    for (const Device& g : gpus_) info_.end_ns = std::max(info_.end_ns, g.synchronize());
    info_.events = recorder_->events_written();
    recorder_->close();
    return info_;
  }

 private:
  TraceRecorder& rec() { return *recorder_; }
  int id(size_t rank) const { return info_.gpu_ids[rank]; }
  uint64_t activation_bytes(int64_t rows) const {
    uint64_t sum = 0;
    for (int64_t w : o_.widths) sum += static_cast<uint64_t>(rows * w) * kFloatBytes;
    return sum;
  }
  int64_t now(const Device& g) const { return g.clock_ns(StreamKind::kCompute); }

  // DistributedSampler without shuffling over a window of the dataset: rank r takes every R-th row.
  std::vector<int64_t> strided_rows(int64_t step, size_t rank) const {
    const int64_t world = static_cast<int64_t>(gpus_.size());
    const int64_t base = step * o_.batch * world;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < o_.batch; ++i)
      rows.push_back((base + static_cast<int64_t>(rank) + world * i) % o_.dataset_len);
    return rows;
  }

  // PyTorch's compute_bucket_assignment_by_size over gradient-ready order (bias before weight,
  // last layer first), with limits [first_bucket_bytes, bucket_cap_bytes].
  std::vector<TraceBucketInfo> rebuilt_buckets() const {
    std::vector<TraceBucketInfo> out;
    TraceBucketInfo current{0, {}, 0};
    for (int p = static_cast<int>(params_.size()) - 1; p >= 0; p -= 2) {
      for (int q : {p, p - 1}) {  // bias (odd index) is ready before weight
        current.params.push_back(q);
        current.bytes += params_[static_cast<size_t>(q)].bytes;
        const uint64_t limit = out.empty() ? o_.first_bucket_bytes : o_.bucket_cap_bytes;
        if (current.bytes >= limit) {
          out.push_back(current);
          current = {static_cast<int>(out.size()), {}, 0};
        }
      }
    }
    if (!current.params.empty()) out.push_back(current);
    return out;
  }

  void kernel(const Device& g, const std::string& name, double flops, double bytes) {
    KernelScope scope(g, name, {flops, bytes});
  }

  void phase_span(const Device& g, const char* name, int64_t start) {
    rec().span(g, {.stream = StreamKind::kCompute,
                   .cat = SpanCategory::kPhase,
                   .name = name,
                   .ts_ns = start,
                   .dur_ns = now(g) - start});
  }

  // A copy on the destination's (or for D2H the source's) copy stream, after `ready_ns`.
  int64_t copy(const Device& src, const Device& dst, uint64_t bytes, int64_t ready_ns, bool from_host) {
    const Device& issuer = dst;
    const LinkSpec& link = from_host ? preset_.host_link : preset_.peer_link;
    const int64_t dur = transfer_time_ns(link, bytes);
    issuer.wait_until(StreamKind::kCopy, ready_ns);
    const int64_t ts = issuer.advance(StreamKind::kCopy, dur);
    rec().copy_transfer(from_host ? Device::cpu() : src, dst, ts, dur, bytes);
    return ts + dur;
  }

  void loss_counter(const Device& g, int64_t step) {
    // Falls like a training loss, with some noise, and stays positive.
    const double loss = 2.2 * std::exp(-0.35 * static_cast<double>(step)) + 0.1 +
                        0.05 * std::sin(1.7 * static_cast<double>(step));
    rec().loss_counter(g, now(g), std::round(loss * 1e4) / 1e4);
  }

  void grad_values(const Device& g, int64_t ts, int param, ValuesWhen when, std::span<const float> v) {
    rec().values(
        g, ts,
        {.name = EventName::kGrad,
         .param = param,
         .when = when,
         .values = v,
         .norm = l2(v, static_cast<uint64_t>(shape_numel(params_[static_cast<size_t>(param)].shape)))});
  }

  void optimizer(const Device& g, int64_t step) {
    g.set_phase(Phase::kOptimizer);
    if (step == 0) g.allocate(param_bytes_, MemoryCategory::kOptimizerState);  // SGD momentum buffers
    const double numel = static_cast<double>(param_bytes_ / kFloatBytes);
    const int64_t dur = kernel_time_ns(preset_, {3 * numel, 16 * numel});
    const int64_t ts = g.advance(StreamKind::kCompute, dur);
    const std::string name = optimizer_step_span_name("SGD");
    rec().span(g, {.stream = StreamKind::kCompute,
                   .cat = SpanCategory::kOptimizer,
                   .name = name,
                   .ts_ns = ts,
                   .dur_ns = dur});
    g.trace_memory();
  }

  // ---- DDP: every rank runs the same step; collectives run in lock step on the comm streams ----
  void ddp_step(int64_t step) {
    const size_t world = gpus_.size();
    const std::vector<TraceBucketInfo>& buckets = step == 0 ? info_.initial_buckets : info_.rebuilt_buckets;
    for (size_t r = 0; r < world; ++r) {
      const Device& g = gpus_[r];
      g.set_phase(Phase::kData);
      if (step <= 1)
        rec().buckets(g, now(g), buckets, step == 0 ? BucketReason::kInitial : BucketReason::kRebuilt);
      std::vector<int64_t> rows = strided_rows(step, r);
      info_.samples[static_cast<size_t>(step)][r] = rows;
      rec().samples(g, now(g), rows);
      const int64_t arrived =
          copy(g, g, static_cast<uint64_t>(o_.batch * o_.widths[0]) * kFloatBytes, now(g), true);
      g.wait_until(StreamKind::kCompute, arrived);
      g.allocate(activation_bytes(o_.batch), MemoryCategory::kActivations);
      g.trace_memory();
    }
    // Every rank computes its own loss; rank 0 logs it.
    for (size_t r = 0; r < world; ++r) forward(gpus_[r], o_.batch, true, r == 0 ? step : -1);

    // Backward in lock step, layer by layer, so each bucket's ring all-reduce can start as soon as
    // its last gradient is ready on every rank and overlap the rest of backward.
    std::vector<int64_t> phase_start(world);
    for (size_t r = 0; r < world; ++r) {
      gpus_[r].set_phase(Phase::kBackward);
      phase_start[r] = now(gpus_[r]);
      if (step == 0) gpus_[r].allocate(param_bytes_, MemoryCategory::kGradients);
    }
    std::vector<bool> ready(params_.size(), false);
    size_t next_bucket = 0;
    for (size_t l = layers_.size(); l-- > 0;) {
      const Layer& layer = layers_[l];
      for (size_t r = 0; r < world; ++r) {
        const Device& g = gpus_[r];
        const double flops = 4.0 * static_cast<double>(o_.batch * layer.in * layer.out);
        kernel(g, layer.backward_name, flops,
               8.0 * static_cast<double>(o_.batch * layer.in + layer.in * layer.out));
        for (int p : {static_cast<int>(2 * l + 1), static_cast<int>(2 * l)})
          rec().instant(g, now(g), GradReady{.param = p});
        if (l > 0 && !layers_[l - 1].relu_backward.empty())
          kernel(g, layers_[l - 1].relu_backward, static_cast<double>(o_.batch * layer.in),
                 8.0 * static_cast<double>(o_.batch * layer.in));
      }
      ready[2 * l] = ready[2 * l + 1] = true;
      // Buckets are launched strictly in order, each once all its gradients are ready.
      while (next_bucket < buckets.size() &&
             std::all_of(buckets[next_bucket].params.begin(), buckets[next_bucket].params.end(),
                         [&](int p) { return ready[static_cast<size_t>(p)]; })) {
        all_reduce_bucket(step, buckets[next_bucket]);
        ++next_bucket;
      }
    }
    for (size_t r = 0; r < world; ++r) {
      const Device& g = gpus_[r];
      g.wait_until(StreamKind::kCompute,
                   g.clock_ns(StreamKind::kComm));  // the reducer waits for every bucket
      phase_span(g, "backward", phase_start[r]);
      g.release(activation_bytes(o_.batch), MemoryCategory::kActivations);
      g.trace_memory();
    }
    for (size_t r = 0; r < world; ++r) {
      optimizer(gpus_[r], step);
    }
  }

  // `with_loss`: the loss kernel runs on this device; `log_step` >= 0: it logs the loss counter.
  void forward(const Device& g, int64_t rows, bool with_loss, int64_t log_step) {
    g.set_phase(Phase::kForward);
    const int64_t start = now(g);
    for (const Layer& layer : layers_) {
      kernel(g, layer.forward_name, 2.0 * static_cast<double>(rows * layer.in * layer.out),
             4.0 * static_cast<double>(rows * layer.in + layer.in * layer.out + rows * layer.out));
      if (!layer.relu_forward.empty())
        kernel(g, layer.relu_forward, static_cast<double>(rows * layer.out),
               8.0 * static_cast<double>(rows * layer.out));
    }
    if (with_loss)
      kernel(g, "forward loss (cross-entropy)", 5.0 * static_cast<double>(rows * o_.widths.back()),
             8.0 * static_cast<double>(rows * o_.widths.back()));
    if (log_step >= 0) loss_counter(g, log_step);
    phase_span(g, "forward", start);
    g.trace_memory();
  }

  void all_reduce_bucket(int64_t step, const TraceBucketInfo& bucket) {
    const size_t world = gpus_.size();
    const int shown = bucket.params.front();  // the parameter whose values are recorded
    std::vector<std::vector<float>> before(world);
    int64_t start = 0;
    for (size_t r = 0; r < world; ++r)
      start = std::max({start, now(gpus_[r]), gpus_[r].clock_ns(StreamKind::kComm)});
    for (size_t r = 0; r < world; ++r) {
      const Device& g = gpus_[r];
      g.wait_until(StreamKind::kComm, start);
      rec().instant(
          g, start,
          BucketLaunched{{.bucket = bucket.id, .bytes = bucket.bytes, .params = bucket.params.size()}});
      before[r] = synthetic_grad_values(step, static_cast<int>(r), shown, o_.values_per_tensor);
      grad_values(g, start, shown, ValuesWhen::kBeforeReduce, before[r]);
    }
    // Ring all-reduce: reduce-scatter then all-gather, 2(n-1) steps; in step k rank r sends
    // chunk (r - k) mod n to rank r+1.
    const uint64_t chunk_bytes = (bucket.bytes + world - 1) / world;
    const int steps = 2 * (static_cast<int>(world) - 1);
    for (int k = 0; k < steps; ++k) {
      int64_t step_start = 0;
      for (const Device& g : gpus_) step_start = std::max(step_start, g.clock_ns(StreamKind::kComm));
      const int64_t dur = transfer_time_ns(preset_.peer_link, chunk_bytes);
      for (size_t r = 0; r < world; ++r) {
        const Device& g = gpus_[r];
        g.wait_until(StreamKind::kComm, step_start);
        const int64_t ts = g.advance(StreamKind::kComm, dur);
        TraceTransfer t;
        t.src = id(r);
        t.dst = id((r + 1) % world);
        t.bytes = chunk_bytes;
        t.ts_ns = ts;
        t.dur_ns = dur;
        t.stream = StreamKind::kComm;
        t.name = k < static_cast<int>(world) - 1 ? "ring reduce-scatter" : "ring all-gather";
        t.collective = collective_seq_;
        t.algo = "ring";
        t.algo_step = k;
        t.chunk =
            static_cast<int>((static_cast<int>(r) - k % static_cast<int>(world) + static_cast<int>(world)) %
                             static_cast<int>(world));
        rec().transfer(g, t);
      }
    }
    std::vector<float> mean(before[0].size(), 0.0f);
    for (const auto& v : before)
      for (size_t i = 0; i < v.size(); ++i) mean[i] += v[i];
    for (float& m : mean) m /= static_cast<float>(world);
    const std::string name = fmt::format("all-reduce bucket {}", bucket.id);
    for (size_t r = 0; r < world; ++r) {
      const Device& g = gpus_[r];
      const int64_t end = g.clock_ns(StreamKind::kComm);
      rec().span(g, {.stream = StreamKind::kComm,
                     .cat = SpanCategory::kCollective,
                     .name = name,
                     .ts_ns = start,
                     .dur_ns = end - start,
                     .args = CollectiveArgs{.coll = collective_seq_, .bytes = bucket.bytes}});
      rec().instant(g, end,
                    BucketDone{{.bucket = bucket.id, .bytes = bucket.bytes, .params = bucket.params.size()}});
      grad_values(g, end, shown, ValuesWhen::kAfterReduce, mean);
    }
    ++collective_seq_;
  }

  // ---- DataParallel: one process; replica r runs on GPU r; GPU 0 holds the model ----
  void dp_step(int64_t step) {
    const size_t n = gpus_.size();
    const Device& g0 = gpus_[0];
    // torch.chunk: ceil(B/n) rows per chunk, maybe fewer chunks than GPUs.
    const int64_t chunk = (o_.batch + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
    const size_t replicas = static_cast<size_t>((o_.batch + chunk - 1) / chunk);
    const int64_t base = (step * o_.batch) % o_.dataset_len;
    std::vector<int64_t> rows(replicas);
    const int64_t t0 = now(g0);
    for (size_t r = 0; r < replicas; ++r) {
      const Device& g = gpus_[r];
      g.set_phase(Phase::kData);
      g.wait_until(StreamKind::kCompute, t0);
      rows[r] = std::min(chunk, o_.batch - static_cast<int64_t>(r) * chunk);
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < rows[r]; ++i)
        idx.push_back((base + static_cast<int64_t>(r) * chunk + i) % o_.dataset_len);
      info_.samples[static_cast<size_t>(step)][r] = idx;
      rec().samples(g, now(g), idx);
      // scatter: each chunk goes from the host to its GPU
      const int64_t arrived =
          copy(g, g, static_cast<uint64_t>(rows[r] * o_.widths[0]) * kFloatBytes, t0, true);
      g.wait_until(StreamKind::kCompute, arrived);
    }
    // replicate: the parameters are broadcast from GPU 0 to every other replica, every step
    for (size_t r = 1; r < replicas; ++r) {
      const Device& g = gpus_[r];
      g.set_phase(Phase::kForward);
      const int64_t arrived = copy(g0, g, param_bytes_, now(g0), false);
      g.wait_until(StreamKind::kCompute, arrived);
      if (step > 0) g.release(param_bytes_, MemoryCategory::kParameters);  // last step's replica
      g.allocate(param_bytes_, MemoryCategory::kParameters);
      g.trace_memory();
    }
    // parallel_apply: one forward per replica
    for (size_t r = 0; r < replicas; ++r) {
      gpus_[r].allocate(activation_bytes(rows[r]), MemoryCategory::kActivations);
      forward(gpus_[r], rows[r], false, -1);
    }
    // gather the outputs on GPU 0, where the loss is computed over the whole batch
    {
      g0.set_phase(Phase::kForward);
      int64_t gathered = now(g0);
      for (size_t r = 1; r < replicas; ++r)
        gathered = std::max(
            gathered, copy(gpus_[r], g0, static_cast<uint64_t>(rows[r] * o_.widths.back()) * kFloatBytes,
                           now(gpus_[r]), false));
      g0.wait_until(StreamKind::kCompute, gathered);
      kernel(g0, "forward loss (cross-entropy)", 5.0 * static_cast<double>(o_.batch * o_.widths.back()),
             8.0 * static_cast<double>(o_.batch * o_.widths.back()));
      loss_counter(g0, step);
    }
    // backward: grad_output is scattered back, each replica back-propagates, and the gradient of
    // the broadcast is a reduce-add onto GPU 0
    std::vector<std::vector<float>> before(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      const Device& g = gpus_[r];
      g.set_phase(Phase::kBackward);
      if (r > 0)
        g.wait_until(
            StreamKind::kCompute,
            copy(g0, g, static_cast<uint64_t>(rows[r] * o_.widths.back()) * kFloatBytes, now(g0), false));
      const int64_t start = now(g);
      if (step == 0 || r > 0) g.allocate(param_bytes_, MemoryCategory::kGradients);
      for (size_t l = layers_.size(); l-- > 0;) {
        const Layer& layer = layers_[l];
        kernel(g, layer.backward_name, 4.0 * static_cast<double>(rows[r] * layer.in * layer.out),
               8.0 * static_cast<double>(rows[r] * layer.in + layer.in * layer.out));
      }
      before[r] = synthetic_grad_values(step, static_cast<int>(r), 0, o_.values_per_tensor);
      grad_values(g, now(g), 0, ValuesWhen::kBeforeReduce, before[r]);
      phase_span(g, "backward", start);
      g.release(activation_bytes(rows[r]), MemoryCategory::kActivations);
      g.trace_memory();
    }
    {
      g0.set_phase(Phase::kBackward);
      int64_t arrived = now(g0);
      for (size_t r = 1; r < replicas; ++r)
        arrived = std::max(arrived, copy(gpus_[r], g0, param_bytes_, now(gpus_[r]), false));
      g0.wait_until(StreamKind::kCompute, arrived);
      const double numel = static_cast<double>(param_bytes_ / kFloatBytes);
      const int64_t dur = kernel_time_ns(
          preset_, {numel * static_cast<double>(replicas - 1), 8.0 * numel * static_cast<double>(replicas)});
      const int64_t ts = g0.advance(StreamKind::kCompute, dur);
      rec().span(g0, {.stream = StreamKind::kCompute,
                      .cat = SpanCategory::kReduce,
                      .name = "reduce_add gradients",
                      .ts_ns = ts,
                      .dur_ns = dur});
      std::vector<float> sum(before[0].size(), 0.0f);
      for (const auto& v : before)
        for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
      grad_values(g0, now(g0), 0, ValuesWhen::kAfterReduce, sum);
      for (size_t r = 1; r < replicas; ++r) {
        gpus_[r].release(param_bytes_, MemoryCategory::kGradients);
        gpus_[r].trace_memory();
      }
    }
    optimizer(g0, step);
    // The other replicas wait for the next step's replicate.
    for (size_t r = 1; r < n; ++r) gpus_[r].wait_until(StreamKind::kCompute, now(g0));
  }

  void single_step(int64_t step) {
    const Device& g = gpus_[0];
    {
      g.set_phase(Phase::kData);
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < o_.batch; ++i) idx.push_back((step * o_.batch + i) % o_.dataset_len);
      info_.samples[static_cast<size_t>(step)][0] = idx;
      rec().samples(g, now(g), idx);
      g.wait_until(StreamKind::kCompute,
                   copy(g, g, static_cast<uint64_t>(o_.batch * o_.widths[0]) * kFloatBytes, now(g), true));
      g.allocate(activation_bytes(o_.batch), MemoryCategory::kActivations);
    }
    forward(g, o_.batch, true, step);
    {
      g.set_phase(Phase::kBackward);
      const int64_t start = now(g);
      if (step == 0) g.allocate(param_bytes_, MemoryCategory::kGradients);
      for (size_t l = layers_.size(); l-- > 0;) {
        const Layer& layer = layers_[l];
        kernel(g, layer.backward_name, 4.0 * static_cast<double>(o_.batch * layer.in * layer.out),
               8.0 * static_cast<double>(o_.batch * layer.in + layer.in * layer.out));
      }
      const std::vector<float> v = synthetic_grad_values(step, 0, 0, o_.values_per_tensor);
      grad_values(g, now(g), 0, ValuesWhen::kLocal, v);
      phase_span(g, "backward", start);
      g.release(activation_bytes(o_.batch), MemoryCategory::kActivations);
      g.trace_memory();
    }
    optimizer(g, step);
  }

  SyntheticTraceOptions o_;
  HardwarePreset preset_;
  std::vector<Layer> layers_;
  std::vector<TraceParamInfo> params_;
  uint64_t param_bytes_ = 0;
  std::vector<Device> gpus_;
  std::unique_ptr<TraceRecorder> recorder_;
  int64_t collective_seq_ = 0;
  SyntheticTraceInfo info_;
};

}  // namespace

SyntheticTraceInfo write_synthetic_trace(const std::filesystem::path& path,
                                         const SyntheticTraceOptions& options) {
  Writer writer(path, options);
  return writer.run();
}

}  // namespace dpscope::viz::tools
