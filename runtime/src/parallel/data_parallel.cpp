// DataParallel: scatter → replicate → parallel_apply → gather, and the reduce-add backward.
#include "dpscope/parallel/data_parallel.hpp"

#include <cmath>

#include "dpscope/core/timing.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "grad_values.hpp"
#include "run_parallel.hpp"

namespace dpscope {
namespace {

// Traces `grad` (of `param`) on `device` when it holds data.
void trace_grad(detail::TracedGradValues& traced, const Device& device, const Parameter& param,
                const Tensor& grad, ValuesWhen when) {
  if (grad.defined() && grad.has_data()) traced.take(device, param.index, when, grad);
}

// Concatenates `pieces` (each [r_i, ...]) along dim 0 on `device`, copying each piece there.
Tensor gather_rows(const std::vector<Tensor>& pieces, const Device& device) {
  Shape shape = pieces.front().shape();
  shape[0] = 0;
  bool with_data = true;
  for (const Tensor& p : pieces) {
    shape[0] += p.size(0);
    with_data = with_data && p.has_data();
  }
  Tensor out = with_data ? Tensor::empty(shape, device) : Tensor::meta(shape, device);
  int64_t row = 0;
  for (const Tensor& p : pieces) {
    // Straight into the output's rows, as torch.cuda.comm.gather does: one traced copy for every
    // replica but the one on `device`, and no staging tensor.
    out.rows(row, p.size(0)).copy_from(p);
    row += p.size(0);
  }
  return out;
}

}  // namespace

std::vector<int64_t> chunk_sizes(int64_t rows, int64_t parts) {
  DPS_CHECK(parts >= 1, ErrorKind::kInvalidArgument, "chunk_sizes: need at least one part, got {}", parts);
  std::vector<int64_t> sizes;
  if (rows <= 0) return sizes;
  const int64_t chunk = (rows + parts - 1) / parts;
  for (int64_t begin = 0; begin < rows; begin += chunk) sizes.push_back(std::min(chunk, rows - begin));
  return sizes;
}

DataParallel::DataParallel(std::unique_ptr<Module> module, std::vector<Device> device_ids,
                           std::optional<Device> output_device)
    : module_(std::move(module)),
      device_ids_(std::move(device_ids)),
      output_device_(output_device.value_or(device_ids_.empty() ? Device::cpu() : device_ids_.front())) {
  DPS_CHECK(module_ != nullptr, ErrorKind::kInvalidArgument, "DataParallel: module is null");
  DPS_CHECK(!device_ids_.empty(), ErrorKind::kInvalidArgument, "DataParallel: device_ids is empty");
  for (size_t i = 0; i < device_ids_.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      DPS_CHECK(!(device_ids_[i] == device_ids_[j]), ErrorKind::kInvalidArgument,
                "DataParallel: device {} appears twice in device_ids", device_ids_[i].name());
    device_ids_[i].set_rank(static_cast<int>(i));
  }
  check_parameters_on_first_device();
}

void DataParallel::check_parameters_on_first_device() const {
  for (const Parameter* p : module_->parameters()) {
    DPS_CHECK(
        p->data.device() == device_ids_.front(), ErrorKind::kDevice,
        "module must have its parameters and buffers on device {} (device_ids[0]) but found one of them on "
        "device: {}",
        device_ids_.front().name(), p->data.device().name());
  }
}

void DataParallel::replicate(size_t count) {
  // Replica 0 is the module itself; the others are fresh copies every forward (as in PyTorch).
  replicas_.clear();
  replicas_.resize(count);
  for (size_t i = 1; i < count; ++i) {
    replicas_[i] = module_->clone(device_ids_[i]);
    replicas_[i]->set_input_requires_grad(module_->input_requires_grad());
  }
}

Tensor DataParallel::forward(const Tensor& input, std::span<const int64_t> sample_indices) {
  DPS_CHECK(input.defined() && input.dim() >= 1, ErrorKind::kInvalidArgument,
            "DataParallel.forward: expected a batch with at least one dimension");
  DPS_CHECK(sample_indices.empty() || static_cast<int64_t>(sample_indices.size()) == input.size(0),
            ErrorKind::kInvalidArgument, "DataParallel.forward: {} sample indices for a batch of {} rows",
            sample_indices.size(), input.size(0));
  check_parameters_on_first_device();
  chunks_ = chunk_sizes(input.size(0), static_cast<int64_t>(device_ids_.size()));
  DPS_CHECK(!chunks_.empty(), ErrorKind::kInvalidArgument, "DataParallel.forward: the batch is empty");
  const size_t k = chunks_.size();
  replicas_used_ = static_cast<int>(k);

  // 1. scatter: rows [begin, begin + chunk) go to device i.
  std::vector<Tensor> inputs(k);
  int64_t begin = 0;
  for (size_t i = 0; i < k; ++i) {
    const Device& dev = device_ids_[i];
    if (TraceSink* tracer = dev.tracer(); tracer && !sample_indices.empty())
      tracer->samples(dev, dev.clock_ns(StreamKind::kCompute),
                      sample_indices.subspan(static_cast<size_t>(begin), static_cast<size_t>(chunks_[i])),
                      std::nullopt);
    inputs[i] = input.rows(begin, chunks_[i]).to(dev, MemoryCategory::kActivations);
    begin += chunks_[i];
  }
  // 2. replicate, 3. parallel_apply.
  replicate(k);
  // Each GPU now holds its rows and its replica (allocated as their copies start): the memory row
  // shows them before the replica's first kernel ends.
  for (size_t i = 0; i < k; ++i)
    if (device_ids_[i].traces_kernels()) device_ids_[i].trace_memory();
  std::vector<Tensor> outputs(k);
  detail::run_parallel(
      k,
      [&](size_t i) {
        Module& replica = i == 0 ? *module_ : *replicas_[i];
        outputs[i] = replica.forward(inputs[i]);
      },
      [&](size_t i) { return fmt::format("replica {} on {}", i, device_ids_[i].name()); });
  output_shapes_.clear();
  for (const Tensor& o : outputs) output_shapes_.push_back(o.shape());
  // 4. gather on the output device.
  return gather_rows(outputs, output_device_);
}

void DataParallel::backward(const Tensor& grad_output) {
  DPS_CHECK(!chunks_.empty() && !output_shapes_.empty(), ErrorKind::kInvalidArgument,
            "DataParallel.backward() called without a forward()");
  int64_t rows = 0;
  for (const Shape& s : output_shapes_) rows += s[0];
  DPS_CHECK(grad_output.dim() >= 1 && grad_output.size(0) == rows, ErrorKind::kInvalidArgument,
            "DataParallel.backward: grad_output has shape {}, expected {} rows",
            shape_to_string(grad_output.shape()), rows);
  const size_t k = chunks_.size();
  // The gradient of gather: scatter grad_output back to the replicas.
  std::vector<Tensor> grads(k);
  int64_t begin = 0;
  for (size_t i = 0; i < k; ++i) {
    grads[i] = grad_output.rows(begin, output_shapes_[i][0]).to(device_ids_[i], MemoryCategory::kActivations);
    begin += output_shapes_[i][0];
  }
  detail::run_parallel(
      k,
      [&](size_t i) {
        Module& replica = i == 0 ? *module_ : *replicas_[i];
        replica.backward(grads[i]);
      },
      [&](size_t i) { return fmt::format("replica {} on {}", i, device_ids_[i].name()); });
  reduce_add_gradients();
  replicas_.clear();  // replicas live for one iteration, as in PyTorch
  chunks_.clear();
  output_shapes_.clear();
}

void DataParallel::reduce_add_gradients() {
  // The gradient of replicate (Broadcast) is ReduceAdd onto device 0: grad = g0 + g1 + ... + g_{k-1}.
  const Device& dev0 = device_ids_.front();
  std::vector<Parameter*> originals = module_->parameters();
  std::vector<std::vector<Parameter*>> replica_params(replicas_.size());
  for (size_t i = 1; i < replicas_.size(); ++i) replica_params[i] = replicas_[i]->parameters();
  detail::TracedGradValues traced;  // written at the end: DataParallel's backward waits anyway
  for (size_t j = 0; j < originals.size(); ++j) {
    Parameter& p = *originals[j];
    if (p.grad.defined()) trace_grad(traced, dev0, p, p.grad, ValuesWhen::kLocal);
    for (size_t i = 1; i < replicas_.size(); ++i) {
      const Tensor& g = replica_params[i][j]->grad;
      if (!g.defined()) continue;
      trace_grad(traced, device_ids_[i], p, g, ValuesWhen::kLocal);
      const Tensor here = g.to(dev0, MemoryCategory::kGradients);
      if (!p.grad.defined()) p.grad = Tensor::zeros(p.data.shape(), dev0, MemoryCategory::kGradients);
      const double n = static_cast<double>(p.grad.numel());
      KernelScope kernel(dev0, "reduce_add", {.flops = n, .bytes = 12.0 * n});
      if (p.grad.has_data() && here.has_data()) kernels::accumulate(here, p.grad);
    }
    if (p.grad.defined()) trace_grad(traced, dev0, p, p.grad, ValuesWhen::kAfterReduce);
  }
  traced.emit();
}

StateDict DataParallel::state_dict() const {
  StateDict out;
  for (auto& [name, tensor] : module_->state_dict()) out.emplace_back("module." + name, tensor);
  return out;
}

void DataParallel::load_state_dict(const StateDict& state) {
  StateDict stripped;
  for (const auto& [name, tensor] : state)
    stripped.emplace_back(name.rfind("module.", 0) == 0 ? name.substr(7) : name, tensor);
  module_->load_state_dict(stripped);
}

}  // namespace dpscope
