// Device handles, memory accounting and simulated stream clocks.
#include "dpscope/core/device.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <mutex>

#include "dpscope/base/error.hpp"
#include "dpscope/core/trace_sink.hpp"

namespace dpscope {

struct DeviceState {
  DeviceKind kind = DeviceKind::kCpu;
  int index = -1;
  std::optional<HardwarePreset> preset;

  mutable std::mutex memory_mutex;
  MemoryStats memory;

  std::array<int64_t, kStreamCount> clock_ns{};

  TraceSink* tracer = nullptr;
  int trace_id = -1;
  int rank = 0;
  int64_t step = -1;
  Phase phase = Phase::kNone;
};

namespace {

int64_t wall_ns_since_origin() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin)
      .count();
}

}  // namespace

uint64_t MemoryStats::in_use_bytes() const {
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  return total;
}

uint64_t MemoryStats::free_bytes() const {
  if (capacity_bytes == 0) return UINT64_MAX;
  const uint64_t used = in_use_bytes();
  return used >= capacity_bytes ? 0 : capacity_bytes - used;
}

Device::Device() : Device(cpu()) {}

Device Device::cpu() {
  // The one cpu device of the process: stateless but for (unlimited) memory accounting.
  static const std::shared_ptr<DeviceState> state = std::make_shared<DeviceState>();
  return Device(state);
}

Device Device::sim(int index, const HardwarePreset& preset) {
  DPS_CHECK(index >= 0, ErrorKind::kInvalidArgument, "sim device index must be >= 0, got {}", index);
  auto state = std::make_shared<DeviceState>();
  state->kind = DeviceKind::kSim;
  state->index = index;
  state->preset = preset;
  state->memory.capacity_bytes = preset.memory_bytes;
  return Device(std::move(state));
}

Device Device::parse(const std::string& name, const HardwarePreset* preset) {
  if (name == "cpu") return cpu();
  if (name.rfind("sim:", 0) == 0) {
    int index = -1;
    const char* first = name.data() + 4;
    const char* last = name.data() + name.size();
    auto [ptr, ec] = std::from_chars(first, last, index);
    DPS_CHECK(ec == std::errc() && ptr == last && index >= 0, ErrorKind::kDevice,
              "invalid device '{}': expected cpu or sim:N with N >= 0", name);
    DPS_CHECK(preset != nullptr, ErrorKind::kDevice, "device '{}' needs a hardware preset", name);
    return sim(index, *preset);
  }
  throw Error(
      ErrorKind::kDevice,
      fmt::format("invalid device '{}': expected cpu or sim:N (cuda:N needs the CUDA backend)", name));
}

DeviceKind Device::kind() const { return state_->kind; }
int Device::index() const { return state_->index; }

std::string Device::name() const {
  switch (state_->kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kSim: return fmt::format("sim:{}", state_->index);
    case DeviceKind::kCuda: return fmt::format("cuda:{}", state_->index);
  }
  return "?";
}

const HardwarePreset* Device::hardware() const { return state_->preset ? &*state_->preset : nullptr; }

void Device::allocate(uint64_t bytes, MemoryCategory category) const {
  std::lock_guard lock(state_->memory_mutex);
  MemoryStats& m = state_->memory;
  if (m.capacity_bytes != 0 && bytes > m.free_bytes()) {
    throw Error(
        ErrorKind::kOutOfMemory,
        fmt::format("{} out of memory: tried to allocate {} for {}; {} free of {} "
                    "(parameters {}, gradients {}, optimizer state {}, activations {}, buffers {})",
                    name(), format_bytes(bytes), to_string(category), format_bytes(m.free_bytes()),
                    format_bytes(m.capacity_bytes), format_bytes(m.bytes[0]), format_bytes(m.bytes[1]),
                    format_bytes(m.bytes[2]), format_bytes(m.bytes[3]), format_bytes(m.bytes[4])));
  }
  m.bytes[static_cast<int>(category)] += bytes;
  m.peak_bytes = std::max(m.peak_bytes, m.in_use_bytes());
}

void Device::release(uint64_t bytes, MemoryCategory category) const {
  std::lock_guard lock(state_->memory_mutex);
  uint64_t& slot = state_->memory.bytes[static_cast<int>(category)];
  DPS_ASSERT(slot >= bytes, "{}: releasing {} bytes of {} but only {} accounted", name(), bytes,
             to_string(category), slot);
  slot -= bytes;
}

MemoryStats Device::memory() const {
  std::lock_guard lock(state_->memory_mutex);
  return state_->memory;
}

int64_t Device::clock_ns(StreamKind stream) const {
  if (state_->kind == DeviceKind::kCpu) return wall_ns_since_origin();
  return state_->clock_ns[static_cast<int>(stream)];
}

int64_t Device::advance(StreamKind stream, int64_t dur_ns) const {
  if (state_->kind == DeviceKind::kCpu) return wall_ns_since_origin() - dur_ns;
  DPS_ASSERT(dur_ns >= 0, "negative duration {} ns on {}", dur_ns, name());
  int64_t& clock = state_->clock_ns[static_cast<int>(stream)];
  const int64_t start = clock;
  clock += dur_ns;
  return start;
}

void Device::wait_until(StreamKind stream, int64_t ts_ns) const {
  if (state_->kind == DeviceKind::kCpu) return;
  int64_t& clock = state_->clock_ns[static_cast<int>(stream)];
  clock = std::max(clock, ts_ns);
}

int64_t Device::synchronize() const {
  if (state_->kind == DeviceKind::kCpu) return wall_ns_since_origin();
  const int64_t latest = *std::max_element(state_->clock_ns.begin(), state_->clock_ns.end());
  state_->clock_ns.fill(latest);
  return latest;
}

void Device::attach_tracer(TraceSink* tracer, int trace_id) const {
  state_->tracer = tracer;
  state_->trace_id = trace_id;
}
TraceSink* Device::tracer() const { return state_->tracer; }
int Device::trace_id() const { return state_->trace_id; }
void Device::set_rank(int rank) const { state_->rank = rank; }
int Device::rank() const { return state_->rank; }
void Device::set_step(int64_t step) const { state_->step = step; }
int64_t Device::step() const { return state_->step; }
void Device::set_phase(Phase phase) const { state_->phase = phase; }
Phase Device::phase() const { return state_->phase; }

void Device::trace_memory() const {
  TraceSink* tracer = state_->tracer;
  if (tracer == nullptr) return;
  const MemoryStats m = memory();
  tracer->memory_counter(*this, clock_ns(StreamKind::kCompute), m);
}

}  // namespace dpscope
