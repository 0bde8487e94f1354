// The parts of core/cuda.hpp that need no CUDA: logical GPU arithmetic, the preset of a GPU by
// name, and the current stream.
#include "cuda_internal.hpp"
#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/format_bytes.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda {

namespace {
thread_local StreamKind t_current_stream = StreamKind::kCompute;
// TraceContextScope's: the device whose context this thread sees replaced, and the replacement.
thread_local const void* t_context_device = nullptr;
thread_local TraceContext t_context;
}  // namespace

int physical_for(int logical, int physical_count) {
  DPS_ASSERT(logical >= 0 && physical_count > 0, "logical GPU {} over {} physical GPUs", logical,
             physical_count);
  return logical % physical_count;
}

int logical_on_physical(int physical, int logical_count, int physical_count) {
  DPS_ASSERT(physical >= 0 && physical < physical_count, "physical GPU {} of {}", physical, physical_count);
  // Logical devices physical, physical + count, physical + 2 * count, ... below logical_count.
  return physical >= logical_count ? 0 : (logical_count - 1 - physical) / physical_count + 1;
}

uint64_t logical_budget(uint64_t physical_free_bytes, int sharing, uint64_t cap_bytes) {
  DPS_ASSERT(sharing > 0, "{} logical GPUs sharing one GPU", sharing);
  const uint64_t split = physical_free_bytes / static_cast<uint64_t>(sharing);
  if (cap_bytes == 0) return split;
  DPS_CHECK(cap_bytes <= split, ErrorKind::kInvalidArgument,
            "--gpu-mem {} per logical GPU does not fit: {} logical GPUs share a GPU with {} free ({} each)",
            format_bytes(cap_bytes), sharing, format_bytes(physical_free_bytes), format_bytes(split));
  return cap_bytes;
}

std::string preset_id_for_gpu(std::string_view driver_name) {
  auto has = [&](std::string_view word) { return driver_name.find(word) != std::string_view::npos; };
  if (has("PCIe") || has("NVL")) return "";
  if (has("H100")) return "h100-sxm";
  if (has("H200")) return "h200";
  return "";
}

void require_available(std::string_view what) {
  const std::string reason = unavailable_reason();
  DPS_CHECK(reason.empty(), ErrorKind::kDevice, "{}: {}", what, reason);
}

StreamKind current_stream() { return t_current_stream; }

StreamGuard::StreamGuard(StreamKind stream) : saved_(t_current_stream) { t_current_stream = stream; }
StreamGuard::~StreamGuard() { t_current_stream = saved_; }

TraceContextScope::TraceContextScope(const DeviceImpl& device, const TraceContext& context)
    : saved_device_(t_context_device), saved_context_(t_context) {
  t_context_device = &device;
  t_context = context;
}

TraceContextScope::~TraceContextScope() {
  t_context_device = saved_device_;
  t_context = saved_context_;
}

}  // namespace dpscope::cuda

namespace dpscope::cuda::detail {

TraceContext* thread_trace_context(const void* device) {
  return device != nullptr && device == t_context_device ? &t_context : nullptr;
}

void check_options(const LogicalGpuOptions& options) {
  DPS_CHECK(options.count >= 1, ErrorKind::kInvalidArgument, "--devices {}: need at least one cuda device",
            options.count);
  DPS_CHECK(options.first >= 0, ErrorKind::kInvalidArgument, "cuda:{}: a cuda device index must be >= 0",
            options.first);
}

}  // namespace dpscope::cuda::detail
