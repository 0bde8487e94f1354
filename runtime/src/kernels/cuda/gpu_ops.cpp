// The Tensor-level CUDA ops of the kernel layer, except Linear's products (gpu_linear.cpp): each
// makes the device current, takes its current stream and scratch (cuda_context.hpp), calls the raw
// launcher (launch.hpp, kernels in elementwise.cu, loss.cu, optim.cu) and checks its status. All
// work is asynchronous on the stream except l2_norm, which returns a number to the host.
#include <algorithm>
#include <cmath>

#include "cuda_context.hpp"
#include "gpu_ops.hpp"
#include "launch.hpp"

namespace dpscope::kernels::gpu {

namespace {

double* scratch_doubles(const Launch& launch, int64_t count) {
  return static_cast<double*>(
      scratch_for(launch, static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(double)));
}

}  // namespace

// ---- element-wise ----

void relu_forward(const Tensor& x, Tensor& y) {
  const Launch launch = begin(x.device(), "relu_forward");
  check(launch, launch_relu_forward(launch.stream, x.f32(), y.f32(), x.numel()));
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  const Launch launch = begin(y.device(), "relu_backward");
  check(launch, launch_relu_backward(launch.stream, y.f32(), dy.f32(), dx.f32(), y.numel()));
}

void fill(Tensor& dst, float value) {
  const Launch launch = begin(dst.device(), "fill");
  check(launch, launch_fill(launch.stream, dst.f32(), value, dst.numel()));
}

double l2_norm(const Tensor& t) {
  if (t.numel() == 0) return 0.0;
  const Launch launch = begin(t.device(), "l2_norm");
  double* scratch = scratch_doubles(launch, sum_scratch_doubles(t.numel()));
  double* total = scratch + sum_scratch_doubles(t.numel()) - 1;
  check(launch, launch_sum_of_squares(launch.stream, t.f32(), t.numel(), scratch, total));
  double sum_of_squares = 0.0;
  check(launch,
        cudaMemcpyAsync(&sum_of_squares, total, sizeof(double), cudaMemcpyDeviceToHost, launch.stream));
  check(launch, cudaStreamSynchronize(launch.stream));
  return std::sqrt(sum_of_squares);
}

ValuesSnapshot snapshot_values(const Tensor& t, size_t count, int64_t stride) {
  ValuesSnapshot snapshot;
  // [count floats | the sum of squares as a double]: count + 2 floats, the double 8-byte aligned
  // when count is even (a device allocation starts aligned).
  const size_t slots = count + count % 2;
  snapshot.pending = Tensor::empty({static_cast<int64_t>(slots + 2)}, t.device(), MemoryCategory::kBuffers);
  const Launch launch = begin(t.device(), "snapshot_values");
  float* out = snapshot.pending.f32();
  check(launch, cudaMemsetAsync(out, 0, snapshot.pending.nbytes(), launch.stream));
  // Elements 0, stride, 2 * stride, ...: one float per row of a 2-D copy whose source pitch is
  // the stride (count <= ceil(numel / stride), checked by the dispatch).
  if (count > 0)
    check(launch, cudaMemcpy2DAsync(out, sizeof(float), t.f32(), static_cast<size_t>(stride) * sizeof(float),
                                    sizeof(float), count, cudaMemcpyDeviceToDevice, launch.stream));
  if (t.numel() > 0) {
    double* scratch = scratch_doubles(launch, sum_scratch_doubles(t.numel()));
    check(launch, launch_sum_of_squares(launch.stream, t.f32(), t.numel(), scratch,
                                        reinterpret_cast<double*>(out + slots)));
  }
  snapshot.values.resize(count);  // how many read() takes
  return snapshot;
}

// Same device, shape and dtype: checked by the dispatch (cpu_elementwise.cpp).
void copy(const Tensor& src, Tensor& dst) {
  if (dst.nbytes() == 0) return;
  const Launch launch = begin(dst.device(), "copy");
  const void* from = src.dtype() == DType::kF32 ? static_cast<const void*>(src.f32()) : src.i64();
  void* to = dst.dtype() == DType::kF32 ? static_cast<void*>(dst.f32()) : dst.i64();
  if (from == to) return;  // a copy onto itself
  check(launch, cudaMemcpyAsync(to, from, dst.nbytes(), cudaMemcpyDeviceToDevice, launch.stream));
}

void scale_copy(const Tensor& src, float scale, Tensor& dst) {
  const Launch launch = begin(dst.device(), "scale_copy");
  check(launch, launch_scale_copy(launch.stream, src.f32(), scale, dst.f32(), dst.numel()));
}

void accumulate(const Tensor& src, Tensor& dst) {
  const Launch launch = begin(dst.device(), "accumulate");
  check(launch, launch_reduce(launch.stream, dst.f32(), src.f32(), Reduction::kSum, dst.numel()));
}

void fp16_round(Tensor& data) {
  const Launch launch = begin(data.device(), "fp16_round");
  check(launch, launch_fp16_round(launch.stream, data.f32(), data.numel()));
}

void fp16_compress(Tensor& data, float divisor) {
  const Launch launch = begin(data.device(), "fp16_compress");
  check(launch, launch_fp16_compress(launch.stream, data.f32(), divisor, data.numel()));
}

void reduce_into(const Device& device, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype) {
  const Launch launch = begin(device, "reduce_into");
  if (dtype == DType::kF32) {
    check(launch, launch_reduce(launch.stream, reinterpret_cast<float*>(dst),
                                reinterpret_cast<const float*>(src), op, count));
  } else {
    check(launch, launch_reduce(launch.stream, reinterpret_cast<int64_t*>(dst),
                                reinterpret_cast<const int64_t*>(src), op, count));
  }
}

void divide(const Device& device, std::byte* data, int64_t count, float divisor) {
  const Launch launch = begin(device, "divide");
  check(launch, launch_divide(launch.stream, reinterpret_cast<float*>(data), divisor, count));
}

// ---- losses ----

void mse_forward(const Tensor& x, const Tensor& target, Tensor& loss) {
  const Launch launch = begin(x.device(), "mse_forward");
  double* scratch = scratch_doubles(launch, sum_scratch_doubles(x.numel()));
  check(launch, launch_mse_forward(launch.stream, x.f32(), target.f32(), x.numel(), scratch, loss.f32()));
}

void mse_backward(const Tensor& x, const Tensor& target, float grad_output, Tensor& dx) {
  const Launch launch = begin(x.device(), "mse_backward");
  const int64_t n = x.numel();
  const float scale = static_cast<float>(2.0 * static_cast<double>(grad_output) / static_cast<double>(n));
  check(launch, launch_mse_backward(launch.stream, x.f32(), target.f32(), scale, dx.f32(), n));
}

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& probs, Tensor& loss) {
  const Launch launch = begin(logits.device(), "cross_entropy_forward");
  const int64_t batch = checked_int(logits.size(0), "batch (one block per row)", launch);
  double* row_loss = scratch_doubles(launch, batch);
  check(launch, launch_cross_entropy_forward(launch.stream, logits.f32(), targets.i64(), probs.f32(), batch,
                                             logits.size(1), row_loss, loss.f32()));
}

void cross_entropy_backward(const Tensor& probs, const Tensor& targets, float grad_output, Tensor& dx) {
  const int64_t batch = probs.size(0);
  if (batch == 0) return;
  const Launch launch = begin(probs.device(), "cross_entropy_backward");
  const float scale = static_cast<float>(static_cast<double>(grad_output) / static_cast<double>(batch));
  check(launch, launch_cross_entropy_backward(launch.stream, probs.f32(), targets.i64(), scale, dx.f32(),
                                              batch, probs.size(1)));
}

// ---- optimizers: batches of up to kMaxTensorsPerLaunch tensors, one launch each ----

void sgd_update_multi(std::span<const SgdTensors> tensors) {
  if (tensors.empty()) return;
  const Launch launch = begin(tensors.front().param->device(), "sgd_update");
  for (size_t first = 0; first < tensors.size(); first += kMaxTensorsPerLaunch) {
    SgdBatch batch{};
    int64_t largest = 0;
    for (size_t k = first; k < std::min(tensors.size(), first + kMaxTensorsPerLaunch); ++k) {
      const SgdTensors& t = tensors[k];
      if (t.param->numel() == 0) continue;
      batch.tensors[batch.count++] = {t.param->f32(), t.grad->f32(),
                                      t.step.use_momentum ? t.momentum_buffer->f32() : nullptr,
                                      t.param->numel(), t.step};
      largest = std::max(largest, t.param->numel());
    }
    check(launch, launch_sgd_multi(launch.stream, batch, largest));
  }
}

void adam_update_multi(std::span<const AdamTensors> tensors) {
  if (tensors.empty()) return;
  const Launch launch = begin(tensors.front().param->device(), "adam_update");
  for (size_t first = 0; first < tensors.size(); first += kMaxTensorsPerLaunch) {
    AdamBatch batch{};
    int64_t largest = 0;
    for (size_t k = first; k < std::min(tensors.size(), first + kMaxTensorsPerLaunch); ++k) {
      const AdamTensors& t = tensors[k];
      if (t.param->numel() == 0) continue;
      batch.tensors[batch.count++] = {t.param->f32(),
                                      t.grad->f32(),
                                      t.exp_avg->f32(),
                                      t.exp_avg_sq->f32(),
                                      t.max_exp_avg_sq->defined() ? t.max_exp_avg_sq->f32() : nullptr,
                                      t.param->numel(),
                                      t.step};
      largest = std::max(largest, t.param->numel());
    }
    check(launch, launch_adam_multi(launch.stream, batch, largest));
  }
}

}  // namespace dpscope::kernels::gpu
