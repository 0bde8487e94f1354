// run_schedule(): a Schedule's steps over MPI point-to-point (mpi_schedule.hpp).
#include "mpi_schedule.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "../sim/sim_backend.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::detail {

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::kI64 ? MPI_INT64_T : MPI_FLOAT; }

namespace {

// The ops this rank takes part in, by step, in schedule order: those it receives (and whether each
// lands in place) and those it sends.
struct RankOps {
  std::vector<std::vector<int32_t>> received;  // per step
  std::vector<std::vector<uint8_t>> in_place;  // parallel to `received`
  std::vector<std::vector<int32_t>> sent;      // per step
  int64_t scratch_elems = 0;                   // the largest step's staged elements
};

bool moves_something(const CommOp& op) { return op.signal || op.to.count_elems > 0; }

bool overlap(Segment a, Segment b) {
  return a.offset_elems < b.offset_elems + b.count_elems && b.offset_elems < a.offset_elems + a.count_elems;
}

RankOps ops_of(const Schedule& s, int rank) {
  RankOps mine;
  mine.received.resize(static_cast<size_t>(s.steps));
  mine.in_place.resize(static_cast<size_t>(s.steps));
  mine.sent.resize(static_cast<size_t>(s.steps));
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const CommOp& op = s.ops[k];
    if (!moves_something(op)) continue;
    if (op.dst == rank) mine.received[static_cast<size_t>(op.step)].push_back(static_cast<int32_t>(k));
    if (op.src == rank) mine.sent[static_cast<size_t>(op.step)].push_back(static_cast<int32_t>(k));
  }
  for (int step = 0; step < s.steps; ++step) {
    const std::vector<int32_t>& received = mine.received[static_cast<size_t>(step)];
    std::vector<uint8_t>& in_place = mine.in_place[static_cast<size_t>(step)];
    int64_t staged = 0;
    for (size_t i = 0; i < received.size(); ++i) {
      const CommOp& op = s.ops[static_cast<size_t>(received[i])];
      // In place only when the order of this step's ops cannot matter for its elements.
      bool alone = !op.reduce && !op.signal;
      for (size_t j = 0; alone && j < received.size(); ++j)
        alone = j == i || !overlap(op.to, s.ops[static_cast<size_t>(received[j])].to);
      in_place.push_back(alone ? 1 : 0);
      if (!alone) staged += op.to.count_elems;
    }
    mine.scratch_elems = std::max(mine.scratch_elems, staged);
  }
  return mine;
}

int message_count(int64_t elems) {
  DPS_CHECK(elems <= INT_MAX, ErrorKind::kUnsupported,
            "a schedule's message of {} elements is more than MPI's int count can hold ({})", elems, INT_MAX);
  return static_cast<int>(elems);
}

}  // namespace

ScheduleTimes run_schedule(MpiChannel& channel, const Device& device, const ScheduleRun& run,
                           const WaitFor& what, Milliseconds timeout,
                           std::chrono::steady_clock::time_point begun, std::vector<MPI_Request> first,
                           const std::function<void()>& after_first) {
  const Schedule& s = *run.schedule;
  const size_t elem = element_size(run.dtype);
  const MPI_Datatype type = mpi_type(run.dtype);
  const RankOps mine = ops_of(s, run.rank);
  // (scratch_elems elements) staged receipts of one step, at offsets in the step's order.
  const Tensor scratch = mine.scratch_elems > 0 ? Tensor::empty({mine.scratch_elems}, device,
                                                                MemoryCategory::kBuffers, run.dtype)
                                                : Tensor();
  std::byte* const staging = mine.scratch_elems > 0 ? raw_data(scratch) : nullptr;
  const std::string context = channel.failure_message(what, "issuing a step of its schedule");
  auto now = [&] { return device.record(StreamKind::kComm).ts_ns; };

  ScheduleTimes times;
  std::vector<MPI_Request> requests;
  bool first_done = false;
  // `first` alone, so the check comes as soon as it can (data of a collective the peers do not run
  // would never arrive), while this rank's first step is already under way.
  auto wait_first = [&] {
    if (first_done) return;
    first_done = true;
    channel.wait(first, what, timeout, nullptr, begun);
    if (after_first) after_first();
  };
  try {
    for (int step = 0; step < s.steps; ++step) {
      const std::vector<int32_t>& received = mine.received[static_cast<size_t>(step)];
      const std::vector<uint8_t>& in_place = mine.in_place[static_cast<size_t>(step)];
      const std::vector<int32_t>& sent = mine.sent[static_cast<size_t>(step)];
      times.step_begin_ns.push_back(now());
      if (received.empty() && sent.empty()) {
        times.step_end_ns.push_back(times.step_begin_ns.back());
        continue;
      }
      std::vector<std::byte*> landed(received.size());  // where each received op's data arrives
      int64_t staged = 0;
      for (size_t i = 0; i < received.size(); ++i) {
        const CommOp& op = s.ops[static_cast<size_t>(received[i])];
        const int64_t count = op.to.count_elems;
        if (in_place[i]) {
          landed[i] = run.buffer.at(op.to.offset_elems, elem);
        } else {
          landed[i] = count > 0 ? staging + static_cast<size_t>(staged) * elem : nullptr;
          staged += count;
        }
        requests.push_back(MPI_REQUEST_NULL);
        check_mpi(MPI_Irecv(landed[i], message_count(count), type, op.src, run.tag, channel.comm(),
                            &requests.back()),
                  "MPI_Irecv", context);
      }
      for (const int32_t k : sent) {
        const CommOp& op = s.ops[static_cast<size_t>(k)];
        std::byte* from = op.from.count_elems > 0 ? run.buffer.at(op.from.offset_elems, elem) : nullptr;
        requests.push_back(MPI_REQUEST_NULL);
        check_mpi(MPI_Isend(from, message_count(op.from.count_elems), type, op.dst, run.tag, channel.comm(),
                            &requests.back()),
                  "MPI_Isend", context);
      }
      wait_first();
      channel.wait(requests, what, timeout, nullptr, begun);
      requests.clear();
      times.step_end_ns.push_back(now());
      // The sim's order: this rank's received ops of the step, in schedule order.
      for (size_t i = 0; i < received.size(); ++i) {
        const CommOp& op = s.ops[static_cast<size_t>(received[i])];
        if (in_place[i] || op.signal || op.to.count_elems == 0) continue;
        std::byte* to = run.buffer.at(op.to.offset_elems, elem);
        if (!op.reduce) {
          std::memcpy(to, landed[i], static_cast<size_t>(op.to.count_elems) * elem);
          continue;
        }
        const int64_t begin_ns = now();
        kernels::reduce_into(DeviceKind::kCpu, to, landed[i], op.to.count_elems, reduction_of(run.reduce_op),
                             run.dtype);
        times.reductions.push_back({.op = received[i], .begin_ns = begin_ns, .end_ns = now()});
      }
    }
    wait_first();  // still due when nothing of this rank's moved
  } catch (const Error&) {
    keep_forever(std::make_shared<Tensor>(scratch));  // MPI may still write it
    throw;
  }
  return times;
}

}  // namespace dpscope::detail
