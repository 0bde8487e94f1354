// SimWorld: the simulated machine the ranks of the `sim` backend share, and their rendezvous.
//
// A SimWorld owns one simulated GPU per rank (sim:0 .. sim:N-1, or devices the caller made, e.g.
// with a trace recorder attached; or cuda:0 .. cuda:N-1 from cuda::make_devices() for the `cuda`
// and `nccl` backends, whose ranks meet and fail the same way and plan with the same network), the hardware
// preset and its network model (comm/network.hpp), the default timeout and algorithm, and the state through
// which rank threads meet at each collective. It is passed explicitly (InitOptions::world, spawn()), never
// found through a global.
//
// Failure handling: abort() marks a rank as failed — every pending and future operation of every
// group of this world then fails fast with that reason; rank_finished() tells the world a rank's
// function returned, so peers waiting for it fail at once instead of after the timeout.
//
// Thread semantics: every member function is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/core/device.hpp"
#include "dpscope/core/preset.hpp"

namespace dpscope {

namespace detail {
struct WorldState;
}

struct SimWorldOptions {
  std::string preset = "h100-sxm";         // assets/presets/<id>.toml, unless `hardware` is set
  std::optional<HardwarePreset> hardware;  // explicit numbers (tests use round ones)
  std::vector<Device> devices;             // empty: sim:0 .. sim:N-1 created from the preset
  Milliseconds timeout{30 * 60 * 1000};    // collectives' default timeout (gloo's 30 min)
  // The algorithm used when a call leaves it at kDefault. Unset: $DPSCOPE_ALGO (read once, here),
  // else kAuto.
  std::optional<Algorithm> algorithm;
  // NCCL_PROTO for every collective's timing (comm/nccl_cost_model.hpp); unset: the tuner's choice.
  std::optional<NcclProto> proto;
  // NCCL_ALGO for the all-reduces' timing where it names an algorithm no schedule is (NVLS: the
  // data still moves by the ring or tree schedule `algorithm` picks); unset: as `algorithm` says.
  std::optional<NcclAlgo> nccl_algo;
};

// Who failed first and why (the root cause spawn() reports).
struct RankFailure {
  int rank = -1;
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

class SimWorld {
 public:
  // Throws kInvalidArgument for world_size < 1, a device list of another length, with a device
  // neither simulated nor cuda, or mixing the two, a bad DPSCOPE_ALGO, or more GPUs than the topology holds.
  static std::shared_ptr<SimWorld> create(int world_size, SimWorldOptions options = {});
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const Device& device(int rank) const;
  const std::vector<Device>& devices() const { return devices_; }
  const HardwarePreset& hardware() const { return hardware_; }
  const NetworkModel& network() const { return *network_; }
  Milliseconds timeout() const { return timeout_; }
  Algorithm default_algorithm() const { return algorithm_; }
  std::optional<NcclProto> proto() const { return proto_; }
  std::optional<NcclAlgo> nccl_algo() const { return nccl_algo_; }

  // Rank `rank` failed with (kind, message): pending and later operations fail fast. The first
  // call wins; later ones are ignored.
  void abort(int rank, ErrorKind kind, const std::string& message);
  bool aborted() const;
  std::optional<RankFailure> first_failure() const;
  // Rank `rank`'s function returned: operations waiting for it fail instead of timing out.
  void rank_finished(int rank);

  detail::WorldState& state() const { return *state_; }

 private:
  SimWorld() = default;
  std::vector<Device> devices_;
  HardwarePreset hardware_;
  std::unique_ptr<NetworkModel> network_;
  Milliseconds timeout_{0};
  Algorithm algorithm_ = Algorithm::kAuto;
  std::optional<NcclProto> proto_;
  std::optional<NcclAlgo> nccl_algo_;
  std::unique_ptr<detail::WorldState> state_;
};

}  // namespace dpscope
