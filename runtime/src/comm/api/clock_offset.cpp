// measure_clock_offset() (comm/clock_offset.hpp).
#include "dpscope/comm/clock_offset.hpp"

#include <limits>
#include <vector>

#include "dpscope/base/error.hpp"

namespace dpscope {

ClockOffset measure_clock_offset(ProcessGroup& group, int rounds) {
  DPS_CHECK(rounds >= 1, ErrorKind::kInvalidArgument, "measure_clock_offset: rounds must be >= 1, got {}",
            rounds);
  const Device& dev = group.device();
  auto clock_tensor = [&](int64_t value) {
    return Tensor::from_ints(std::vector<int64_t>{value}, {1}, dev, MemoryCategory::kBuffers);
  };
  ClockOffset best{0, std::numeric_limits<int64_t>::max()};
  for (int peer = 1; peer < group.size(); ++peer) {
    if (group.rank() != 0 && group.rank() != peer) continue;
    for (int round = 0; round < rounds; ++round) {
      if (group.rank() == peer) {
        const int64_t sent = dev.clock_ns(StreamKind::kCompute);
        Tensor ping = clock_tensor(sent);
        group.send(ping, 0)->wait();
        Tensor pong = clock_tensor(0);
        group.recv(pong, 0)->wait();
        const int64_t half_trip = (dev.clock_ns(StreamKind::kCompute) - sent) / 2;
        if (half_trip < best.uncertainty_ns) best = {pong.to_ints()[0] - (sent + half_trip), half_trip};
      } else {
        Tensor ping = clock_tensor(0);
        group.recv(ping, peer)->wait();
        Tensor pong = clock_tensor(dev.clock_ns(StreamKind::kCompute));
        group.send(pong, peer)->wait();
      }
    }
  }
  return group.rank() == 0 ? ClockOffset{} : best;
}

}  // namespace dpscope
