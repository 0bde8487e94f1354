// SimWorld (creation, failure handling) and the small pieces of the sim backend's shared state:
// buffers, the step barrier and SimWork.
#include "dpscope/comm/sim_world.hpp"

#include "dpscope/core/timing.hpp"
#include "sim_state.hpp"

namespace dpscope {

SimWorld::~SimWorld() = default;

std::shared_ptr<SimWorld> SimWorld::create(int world_size, SimWorldOptions options) {
  DPS_CHECK(world_size >= 1, ErrorKind::kInvalidArgument, "world size must be at least 1, got {}",
            world_size);
  DPS_CHECK(options.timeout.count() > 0, ErrorKind::kInvalidArgument, "timeout must be positive, got {} ms",
            options.timeout.count());
  std::shared_ptr<SimWorld> world(new SimWorld());
  world->hardware_ = options.hardware ? *options.hardware : find_preset(options.preset);
  if (options.devices.empty()) {
    for (int r = 0; r < world_size; ++r) world->devices_.push_back(Device::sim(r, world->hardware_));
  } else {
    DPS_CHECK(static_cast<int>(options.devices.size()) == world_size, ErrorKind::kInvalidArgument,
              "world of {} ranks given {} devices", world_size, options.devices.size());
    // All simulated (the sim backend) or all cuda (the cuda and nccl backends' ranks).
    const DeviceKind kind = options.devices.front().kind();
    for (const Device& d : options.devices) {
      DPS_CHECK(d.is_simulated() || d.kind() == DeviceKind::kCuda, ErrorKind::kInvalidArgument,
                "the sim backend needs simulated devices (sim:N), got {}", d.name());
      DPS_CHECK(d.kind() == kind, ErrorKind::kInvalidArgument,
                "a world's devices are all simulated or all cuda, got {} and {}",
                options.devices.front().name(), d.name());
    }
    world->devices_ = options.devices;
  }
  int gpus = 0;
  for (size_t i = 0; i < world->devices_.size(); ++i) {
    const Device& d = world->devices_[i];
    for (size_t j = 0; j < i; ++j)
      DPS_CHECK(world->devices_[j].index() != d.index(), ErrorKind::kInvalidArgument,
                "Duplicate GPU detected: ranks {} and {} are both on {}", j, i, d.name());
    gpus = std::max(gpus, d.index() + 1);
  }
  world->network_ = std::make_unique<NetworkModel>(world->hardware_, gpus);
  world->timeout_ = options.timeout;
  world->proto_ = options.proto;
  world->nccl_algo_ = options.nccl_algo;
  if (options.algorithm) {
    world->algorithm_ = *options.algorithm == Algorithm::kDefault ? Algorithm::kAuto : *options.algorithm;
  } else {
    world->algorithm_ = algorithm_from_env();
  }
  world->state_ = std::make_unique<detail::WorldState>();
  world->state_->finished.assign(world_size, false);
  auto group = std::make_shared<detail::GroupState>();
  group->world = world.get();
  group->id = 0;
  for (int r = 0; r < world_size; ++r) {
    group->global_ranks.push_back(r);
    group->gpus.push_back(world->devices_[r].index());
  }
  group->ring = world->network_->ring_order(group->gpus);
  group->timeout = world->timeout_;
  world->state_->default_group = std::move(group);
  return world;
}

const Device& SimWorld::device(int rank) const {
  DPS_CHECK(rank >= 0 && rank < size(), ErrorKind::kInvalidArgument, "rank {} out of range for a world of {}",
            rank, size());
  return devices_[rank];
}

void SimWorld::abort(int rank, ErrorKind kind, const std::string& message) {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->failure) state_->failure = RankFailure{rank, kind, message};
  }
  state_->cv.notify_all();
}

bool SimWorld::aborted() const {
  std::lock_guard lock(state_->mutex);
  return state_->failure.has_value();
}

std::optional<RankFailure> SimWorld::first_failure() const {
  std::lock_guard lock(state_->mutex);
  return state_->failure;
}

void SimWorld::rank_finished(int rank) {
  {
    std::lock_guard lock(state_->mutex);
    if (rank >= 0 && rank < size()) state_->finished[rank] = true;
  }
  state_->cv.notify_all();
}

namespace detail {

std::byte* RankBuffer::at(int64_t offset_elems, size_t elem_size) const {
  const int64_t block = block_elems > 0 ? offset_elems / block_elems : 0;
  DPS_ASSERT(block >= 0 && block < static_cast<int64_t>(blocks.size()) && blocks[block] != nullptr,
             "offset {} outside a buffer of {} blocks of {} elements", offset_elems, blocks.size(),
             block_elems);
  return blocks[block] + static_cast<size_t>(offset_elems - block * block_elems) * elem_size;
}

bool StepBarrier::arrive_and_wait(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  const int64_t generation = generation_;
  if (++count_ == parties_) {
    count_ = 0;
    ++generation_;
    lock.unlock();
    cv_.notify_all();
    return true;
  }
  return cv_.wait_until(lock, deadline, [&] { return generation_ != generation; });
}

void SimWork::complete_locked(int64_t start_ns, int64_t end_ns, bool comm_on_wait) {
  completed_ = true;
  start_ns_ = start_ns;
  end_ns_ = end_ns;
  comm_on_wait_ = comm_on_wait;
}

void SimWork::fail_locked(ErrorKind kind, const std::string& message) {
  completed_ = true;
  error_ = Failure{kind, message};
}

void SimWork::complete(int64_t start_ns, int64_t end_ns, bool comm_on_wait) {
  {
    std::lock_guard lock(world_->state().mutex);
    complete_locked(start_ns, end_ns, comm_on_wait);
  }
  world_->state().cv.notify_all();
}

void SimWork::fail(ErrorKind kind, const std::string& message, int64_t found_ns) {
  {
    std::lock_guard lock(world_->state().mutex);
    fail_locked(kind, message);
    error_->found_ns = found_ns;
  }
  world_->state().cv.notify_all();
}

void SimWork::wait() {
  WorldState& state = world_->state();
  std::unique_lock lock(state.mutex);
  const Clock::time_point begun = Clock::now();
  auto peer_gone = [&] { return peer_ >= 0 && state.finished[peer_]; };
  state.cv.wait_until(lock, begun + timeout_,
                      [&] { return completed_ || state.failure.has_value() || peer_gone(); });
  if (!completed_) {
    const std::string what = fmt::format("[Rank {}] {} (SequenceNumber={})", rank_, to_string(op_), seq_);
    if (state.failure) {
      fail_locked(state.failure->kind, fmt::format("{} aborted because rank {} failed: {}", what,
                                                   state.failure->rank, state.failure->message));
    } else if (peer_gone()) {
      fail_locked(ErrorKind::kMismatch,
                  fmt::format("{} to rank {} can never complete: rank {} returned from its "
                              "function without receiving it",
                              what, peer_, peer_));
    } else {
      const auto elapsed = std::chrono::duration_cast<Milliseconds>(Clock::now() - begun).count();
      fail_locked(
          ErrorKind::kTimeout,
          fmt::format("[Rank {}] Watchdog caught collective operation timeout: WorkSim(SequenceNumber={}, "
                      "OpType={}, Timeout(ms)={}) ran for {} milliseconds before timing out (rank {} never "
                      "received it)",
                      rank_, seq_, to_string(op_), timeout_.count(), elapsed, peer_));
    }
  }
  if (error_) {
    Error error(error_->kind, error_->message);  // built here, under the lock, owned by this thread
    const int64_t found = error_->found_ns;
    lock.unlock();
    if (found >= 0) device_.wait_until(StreamKind::kCompute, found);
    throw error;
  }
  const int64_t end = end_ns_;
  const bool comm = comm_on_wait_;
  lock.unlock();
  if (comm) device_.wait_until(StreamKind::kComm, end);
  device_.wait_until(StreamKind::kCompute, end);
}

bool SimWork::is_completed() const {
  std::lock_guard lock(world_->state().mutex);
  return completed_;
}

bool SimWork::is_success() const {
  std::lock_guard lock(world_->state().mutex);
  return completed_ && !error_;
}

std::exception_ptr SimWork::exception() const {
  std::lock_guard lock(world_->state().mutex);
  return error_ ? std::make_exception_ptr(Error(error_->kind, error_->message)) : nullptr;
}

int64_t SimWork::start_ns() const {
  std::lock_guard lock(world_->state().mutex);
  return start_ns_;
}

int64_t SimWork::end_ns() const {
  std::lock_guard lock(world_->state().mutex);
  return end_ns_;
}

}  // namespace detail
}  // namespace dpscope
