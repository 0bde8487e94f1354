// DataParallel: single-process, multi-GPU data parallelism with PyTorch 1.13's semantics
// (torch/nn/parallel/data_parallel.py, replicate.py, scatter_gather.py, comm.py; docs/parallel.md).
//
// forward(input):
//   1. scatter  — the batch is split along dim 0 with torch.chunk semantics: chunks of
//                 ceil(N / n) rows, the last one smaller, and possibly FEWER chunks than devices
//                 (N = 10 on 4 GPUs → 3, 3, 3, 1; N = 5 on 4 → 2, 2, 1: only 3 replicas run);
//                 each chunk is copied to its device;
//   2. replicate — the module (parameters on device_ids[0]) is copied to device_ids[1..k) — every
//                 forward, as PyTorch does; replica 0 IS the wrapped module;
//   3. parallel_apply — one host thread per replica runs its forward;
//   4. gather   — the outputs are copied to output_device (default device_ids[0]) and concatenated.
// backward(grad_output): the gradient of gather is a scatter of grad_output; each replica
// back-propagates in its own thread; the gradient of replicate is a reduce-add: the wrapped
// module's parameters on device 0 receive the SUM of every replica's gradient (replica order, so
// the result is deterministic). With the loss taken over the gathered output (mean over the whole
// batch), DataParallel computes the same gradients as one device on the same batch.
//
// Every copy goes through Tensor::to(), so it is charged on the simulated links and traced as a
// transfer with its bytes; each device's sample indices are traced. Lesson 02 shows all of it.
// Thread semantics: forward() and backward() are called from one thread; they start and join one
// thread per replica; each replica's device is driven only by its thread meanwhile.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dpscope/nn/module.hpp"

namespace dpscope {

// torch.chunk's split of `rows` into at most `parts` pieces: sizes of ceil(rows / parts), the last
// one smaller; fewer pieces when the size rounds up. chunk_sizes(10, 4) = {3, 3, 3, 1}.
std::vector<int64_t> chunk_sizes(int64_t rows, int64_t parts);

class DataParallel {
 public:
  // `module`'s parameters must live on device_ids[0] ("module must have its parameters and buffers
  // on device sim:0 (device_ids[0]) but found one of them on device: cpu"). Device ids are given
  // in rank order; replica i runs on device_ids[i] and traces with rank i.
  DataParallel(std::unique_ptr<Module> module, std::vector<Device> device_ids,
               std::optional<Device> output_device = std::nullopt);

  // The wrapped original (PyTorch's `model.module`).
  Module& module() { return *module_; }
  const Module& module() const { return *module_; }
  const std::vector<Device>& device_ids() const { return device_ids_; }
  const Device& output_device() const { return output_device_; }

  // Scatter → replicate → parallel_apply → gather. `sample_indices` (optional, one per input row)
  // are split like the input and traced per device.
  Tensor forward(const Tensor& input, std::span<const int64_t> sample_indices = {});
  // Scatter grad_output, back-propagate every replica, reduce-add into module()'s gradients.
  void backward(const Tensor& grad_output);

  // How many replicas the last forward() used (≤ device count; see chunk_sizes).
  int replicas_used() const { return replicas_used_; }

  std::vector<Parameter*> parameters() { return module_->parameters(); }
  // module()'s state with every key prefixed by "module.", as PyTorch saves a DataParallel.
  StateDict state_dict() const;
  // Accepts keys with or without the "module." prefix.
  void load_state_dict(const StateDict& state);

 private:
  void check_parameters_on_first_device() const;
  void replicate(size_t count);
  void reduce_add_gradients();

  std::unique_ptr<Module> module_;
  std::vector<Device> device_ids_;
  Device output_device_;
  std::vector<std::unique_ptr<Module>> replicas_;  // [1..k): copies made by the last forward
  std::vector<int64_t> chunks_;                    // rows per replica in the last forward
  std::vector<Shape> output_shapes_;               // per replica, for scattering grad_output
  int replicas_used_ = 0;
};

}  // namespace dpscope
