// Work: the handle every ProcessGroup operation returns (c10d's Work).
//
// Host vs simulated time. On the sim backend a collective is executed by the time its call
// returns: the data has moved and the returned Work is completed on the host. What stays pending
// is *simulated* time: the collective ran on the rank's COMM stream over [start_ns, end_ns], and
// the rank's COMPUTE stream only learns about it when wait() is called — exactly like
// cudaStreamWaitEvent after an asynchronous NCCL call. That is how DDP's overlap of all-reduce
// with the rest of backward becomes visible in simulated time.
//
// A send() is the one exception: its Work completes on the host when the matching recv() has
// taken the data; wait() blocks until then (or the group's timeout).
//
// Failures of the operation itself (signature mismatch across ranks, timeout, a peer that failed
// or exited) are reported here: is_success() is false, exception() holds the dpscope::Error, and
// wait() rethrows it. Argument errors throw from the call instead, before anything is sent.
//
// Thread semantics: a Work belongs to the rank thread that issued it; wait() must be called from
// that thread (it moves that rank's stream clocks). is_completed() and exception() may be called
// from any thread.
#pragma once

#include <cstdint>
#include <exception>

#include "dpscope/comm/types.hpp"

namespace dpscope {

class Work {
 public:
  virtual ~Work() = default;

  // Blocks until the operation is completed on the host (sim collectives: already true), rethrows
  // its failure, then makes this rank's compute stream wait for the simulated end (end_ns()).
  // Calling it twice is harmless.
  virtual void wait() = 0;
  // True once the operation finished on the host, successfully or not. Says nothing about
  // simulated time: compare end_ns() with the compute stream's clock for that.
  virtual bool is_completed() const = 0;
  // True when completed without an error.
  virtual bool is_success() const = 0;
  // The failure (a dpscope::Error), or nullptr.
  virtual std::exception_ptr exception() const = 0;

  virtual OpType op_type() const = 0;
  // The group's sequence number of this collective (per-peer counter for send/recv).
  virtual int64_t sequence_number() const = 0;
  // Interval of this operation on this rank's comm stream: simulated on sim; on cuda and nccl
  // measured with CUDA events (the device clock's nanoseconds).
  virtual int64_t start_ns() const = 0;
  virtual int64_t end_ns() const = 0;
};

}  // namespace dpscope
