// DataParallel's scatter and gather between logical GPUs, measured against a plain device-to-device
// cudaMemcpy of the same bytes on the same GPU, side by side in one run (goal >= 70 %: docs/gpu.md).
// scripts/gpu-check.sh runs it and reads its "bench-row" lines and "bench-value d2d_copy_gbps",
// the copy rate the all-reduce stage compares with.
//
// The scatter and gather below make exactly the calls DataParallel makes (parallel/data_parallel.cpp):
// scatter = input.rows(chunk).to(device k); gather = output.rows(chunk).copy_from(piece), a copy
// straight into the output on device 0 (as torch.cuda.comm.gather does).
// Bandwidth counts the bytes each copies, per second of wall time between fully synchronized GPUs:
// the scatter's chunk 0 stays on device 0 as a view (not copied), the gather copies all four chunks
// into its new output, device 0's own chunk too.
//
// Usage: gpu_copy_bench [MIB=1024] [DEVICES=4] [REPEATS=10]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dpscope/core/tensor.hpp"
#include "dpscope/parallel/data_parallel.hpp"
#include "gpu_bench_common.hpp"

namespace {

using namespace dpscope;
using gpu_bench::check_cuda;

// Seconds of one synchronous cudaMemcpy device-to-device of `bytes` on GPU 0 (median of `repeats`).
double memcpy_seconds(uint64_t bytes, int repeats) {
  gpu_bench::DeviceBuffer src(0, bytes), dst(0, bytes);
  check_cuda(cudaMemset(src.data(), 0, bytes), "cudaMemset", 0);
  gpu_bench::EventTimer timer(0, nullptr);  // the legacy default stream: where cudaMemcpy runs
  std::vector<double> seconds;
  for (int r = 0; r <= repeats; ++r) {  // r == 0 warms up
    timer.start();
    check_cuda(cudaMemcpy(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy", 0);
    const double s = timer.stop_seconds();
    if (r > 0) seconds.push_back(s);
  }
  return gpu_bench::median(seconds);
}

void synchronize_all(const std::vector<Device>& devices) {
  for (const Device& d : devices) d.synchronize();
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", 0);
}

// Median wall seconds of `body` between synchronized devices.
template <typename Body>
double timed(const std::vector<Device>& devices, int repeats, Body body) {
  std::vector<double> seconds;
  for (int r = 0; r <= repeats; ++r) {
    synchronize_all(devices);
    const auto t0 = std::chrono::steady_clock::now();
    body();
    synchronize_all(devices);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) seconds.push_back(s);
  }
  return gpu_bench::median(seconds);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const uint64_t mib = argc > 1 ? std::stoull(argv[1]) : 1024;
    const int count = argc > 2 ? std::stoi(argv[2]) : 4;
    const int repeats = argc > 3 ? std::stoi(argv[3]) : 10;
    DPS_CHECK(mib >= 1 && count >= 2 && repeats >= 1, ErrorKind::kUsage,
              "usage: gpu_copy_bench [MIB >= 1] [DEVICES >= 2] [REPEATS >= 1]");
    gpu_bench::require_gpu();

    // The input a DataParallel forward scatters: [rows, 4096] floats, rows a multiple of `count`.
    constexpr int64_t kCols = 4096;
    const int64_t rows = static_cast<int64_t>((mib << 20) / (kCols * sizeof(float))) / count * count;
    const uint64_t bytes = static_cast<uint64_t>(rows * kCols) * sizeof(float);
    const double copy_s = memcpy_seconds(bytes, repeats);

    const std::vector<Device> devices = cuda::make_devices({.count = count});
    const std::vector<int64_t> chunks = chunk_sizes(rows, count);
    const Tensor input = Tensor::zeros({rows, kCols}, devices[0]);
    uint64_t moved = 0;  // bytes that change device: every chunk but the first
    for (size_t k = 1; k < chunks.size(); ++k)
      moved += static_cast<uint64_t>(chunks[k] * kCols) * sizeof(float);

    std::vector<Tensor> pieces(chunks.size());
    auto scatter = [&] {
      int64_t begin = 0;
      for (size_t k = 0; k < chunks.size(); ++k) {
        pieces[k] = input.rows(begin, chunks[k]).to(devices[k], MemoryCategory::kActivations);
        begin += chunks[k];
      }
    };
    const double scatter_s = timed(devices, repeats, scatter);
    Tensor output = Tensor::empty({rows, kCols}, devices[0]);
    auto gather = [&] {
      int64_t row = 0;
      for (size_t k = 0; k < chunks.size(); ++k) {
        output.rows(row, chunks[k]).copy_from(pieces[k]);
        row += chunks[k];
      }
    };
    const double gather_s = timed(devices, repeats, gather);

    const double copy_gbps = static_cast<double>(bytes) / copy_s / 1e9;
    const double scatter_gbps = static_cast<double>(moved) / scatter_s / 1e9;
    // The gather copies every chunk, device 0's own too (into the new output, as PyTorch's does).
    const double gather_gbps = static_cast<double>(bytes) / gather_s / 1e9;
    std::printf("# gpu_copy_bench: %d logical GPUs on GPU %d (%s), %.0f MiB input, median of %d\n", count,
                cuda::physical_index(devices[0].impl()), cuda::physical_name(devices[0].impl()).c_str(),
                static_cast<double>(bytes) / (1 << 20), repeats);
    std::printf("%-46s%12s%16s\n", "what", "GB/s", "vs cudaMemcpy");
    std::printf("%-46s%12.1f%16.2f\n", "cudaMemcpy device-to-device (bytes copied)", copy_gbps, 1.0);
    std::printf("%-46s%12.1f%16.2f\n", "DataParallel scatter (Tensor::to)", scatter_gbps,
                scatter_gbps / copy_gbps);
    std::printf("%-46s%12.1f%16.2f\n", "DataParallel gather (copy_from into output)", gather_gbps,
                gather_gbps / copy_gbps);
    gpu_bench::print_value("d2d_copy_gbps", copy_gbps);
    const std::string reference = fmt::format("cudaMemcpy D2D {:.1f} GB/s", copy_gbps);
    gpu_bench::print_row(fmt::format("DP scatter, {} logical GPUs (GB/s)", count),
                         fmt::format("{:.1f}", scatter_gbps), reference, scatter_gbps / copy_gbps, ">= 0.70");
    gpu_bench::print_row(fmt::format("DP gather, {} logical GPUs (GB/s)", count),
                         fmt::format("{:.1f}", gather_gbps), reference, gather_gbps / copy_gbps, ">= 0.70");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_copy_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
