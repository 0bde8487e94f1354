// MpiChannel: one group's MPI communicator together with what keeps MPI from ever hanging us.
//
// MPI's blocking calls cannot be interrupted, so the mpi backend issues every operation as a
// nonblocking call (MPI_Iallreduce, MPI_Isend, ...) and MpiChannel::wait() polls MPI_Testall until
// the requests complete or one of these ends the wait with a dpscope::Error:
//  * the timeout: kTimeout, "[Rank 1] mpi ALLREDUCE (SequenceNumber=3) failed: Watchdog caught
//    collective operation timeout: it ran for 501 milliseconds (Timeout(ms)=500)";
//  * a notice from a peer (below): the peer failed (its kind, "aborted because rank 2 failed: ..."),
//    or it returned from its function without ever joining this collective (kMismatch). A notice
//    carries how many collectives the peer had completed on the group: one it completed may still
//    complete here (MPI finished the peer's part), so it gets a short grace (kFailureGrace) before
//    failing; later ones fail at once;
//  * a failure recorded on this rank earlier (abort(), a timeout, a mismatch): the communicator may
//    hold requests that never complete, so every later call fails at once.
// A rank that fails or times out tells its peers with a notice, so they fail fast too.
//
// Notices are small point-to-point messages on each communicator under a reserved tag (kNoticeTag;
// user tags stay below kFirstReservedTag): every channel keeps one MPI_Irecv from any source
// posted. A rank's channels (its world group and sub-groups) share one MpiRankState, so a failure
// noticed on any of them ends waits on all of them, and abort() sends the notice on all of them.
//
// Waiting: MPI_Testall drives MPI's progress (OpenMPI progresses only inside MPI calls; a
// nonblocking collective's schedule moves one round per test), so the loop polls and yields the
// core between polls for the first second: a yield lets an oversubscribed peer run, and every
// round follows its predecessor at once. After a second (a peer that is late, or gone) it sleeps
// briefly between polls instead of spinning until the timeout. Sleeping from the start made every
// round wait out a sleep: a 16 MiB all-reduce of 4 ranks on 2 cores took 75 ms instead of 20.
//
// Thread semantics: wait() runs on the rank's comm worker and, for a send's Work, on the rank's
// thread (MPI_THREAD_MULTIPLE); polling the notices is serialised by the state's mutex. abort() may
// be called from any thread.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/types.hpp"

namespace dpscope::detail {

// Tags: user tags of send/recv are [0, kFirstReservedTag); the backend's own are above.
constexpr int kFirstReservedTag = 32760;
constexpr int kFingerprintTag = 32760;  // each collective's fingerprint, to the right-hand neighbour
constexpr int kNoticeTag = 32761;       // failure and finished notices
constexpr int kArrivalTag = 32762;      // init_process_group's arrival on MPI_COMM_WORLD
constexpr int kCreateTag = 32763;       // MPI_Comm_create_group's own messages
// Our schedules' data (mpi_schedule.hpp): one tag per collective, from kFirstScheduleTag up to
// MPI_TAG_UB, picked by a hash of the collective's fingerprint (schedule_tag()).
constexpr int kFirstScheduleTag = 32764;

// How long a collective a failed peer had joined may still take to complete (file comment).
constexpr std::chrono::milliseconds kFailureGrace{200};

// Keeps `buffers` alive until the process ends. MPI cannot cancel a collective, so a request given
// up on (a timeout, a peer's failure) may still read or write its buffers later: they must never be
// freed. A small, deliberate leak, only after a failure.
void keep_forever(std::shared_ptr<void> buffers);

// The kind of the first failure any group of this process recorded (a timeout, a mismatch, an
// abort, a peer's notice), or nullopt: MPI_Finalize at exit is bounded after one (mpi_runtime.cpp).
std::optional<ErrorKind> first_failure_in_process();

// Throws kInternal naming the MPI call when `rc` is not MPI_SUCCESS: "<context>: MPI_Isend failed:
// <MPI's error string>".
void check_mpi(int rc, const char* call, const std::string& context);

struct MpiFailure {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;  // why, without the "[Rank r] mpi OP failed: " prefix
  // A peer's notice: the channel it came on, the collectives the peer had completed there, and when.
  const void* channel = nullptr;
  int64_t peer_completed = 0;
  std::chrono::steady_clock::time_point noticed{};
};

class MpiChannel;

// What one rank's channels share: the first failure, and the live channels (for abort()).
class MpiRankState {
 public:
  std::optional<MpiFailure> failure() const;
  // Records `failure` unless one is recorded already; true if this one was recorded.
  bool fail(MpiFailure failure);

 private:
  friend class MpiChannel;
  mutable std::mutex mutex_;  // guards failure_ and channels_; held while polling notices
  std::optional<MpiFailure> failure_;
  std::vector<MpiChannel*> channels_;
};

// What a wait is for, for its error messages.
struct WaitFor {
  OpType op = OpType::kAllReduce;
  int64_t seq = 0;
  bool collective = true;  // collectives fail when a peer returned before joining them
};

class MpiChannel {
 public:
  // Takes ownership of `comm` (this rank is `rank` of it) and posts the notice receive.
  // `process_ranks`: the process rank (the rank in the world group, rank-K.jsonl's K) of each rank
  // of `comm`; empty for the world itself (the identity).
  MpiChannel(MPI_Comm comm, std::shared_ptr<MpiRankState> state, std::vector<int> process_ranks = {});
  // Cancels the notice receive and frees the communicator, unless the group failed (then it is
  // kept: requests given up on may still be progressed by MPI).
  ~MpiChannel();
  MpiChannel(const MpiChannel&) = delete;
  MpiChannel& operator=(const MpiChannel&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::shared_ptr<MpiRankState>& state() const { return state_; }
  // The process rank (its rank in the world group: mpirun's, or RANK under dpscope launch, where
  // each process is an MPI singleton) of each rank of this group.
  const std::vector<int>& process_ranks() const { return process_ranks_; }
  // The tag of a schedule's messages for the collective whose fingerprint is `fingerprint`: ranks
  // running the same collective agree on it, and ranks running different ones almost surely do
  // not, so their messages never match (a size mismatch would end in MPI_ERR_TRUNCATE instead of
  // the fingerprint check's kMismatch). kFirstScheduleTag where MPI_TAG_UB leaves no room.
  int schedule_tag(const std::string& fingerprint) const;
  // The sequence number of the next collective on this group (counts it as issued).
  int64_t next_seq() { return issued_++; }
  // Collective `seq` completed on this rank (they complete in order).
  void completed(int64_t seq) { completed_ = seq + 1; }

  // Polls until every request in `requests` completed (MPI frees them), or throws (file comment).
  // On a timeout the failure is recorded and the peers are told. `statuses`, when given, receives
  // one status per request.
  // `begun`: when the operation started (the timeout counts from there); default now.
  void wait(std::vector<MPI_Request>& requests, const WaitFor& what, Milliseconds timeout,
            std::vector<MPI_Status>* statuses = nullptr,
            std::chrono::steady_clock::time_point begun = std::chrono::steady_clock::now());
  // Throws the recorded failure, if any, for `what` (before issuing an operation, and while
  // waiting; a peer's failure waits out the grace for collectives that peer joined).
  void throw_if_failed(const WaitFor& what);
  // "[Rank 1] mpi ALLREDUCE (SequenceNumber=3) failed: <why>", as every failure of `what` reads.
  std::string failure_message(const WaitFor& what, const std::string& why) const;

  // This rank failed: records it and tells the peers of every channel of this rank.
  void abort(ErrorKind kind, const std::string& message);
  // Records `failure` (a mismatch or timeout seen here) and tells the peers of every channel.
  void fail_and_notify(const MpiFailure& failure);
  // This rank's function returned: peers waiting in a collective it never issued fail at once.
  void notify_finished();

 private:
  struct Notice;
  // Handles notices that arrived (caller holds state_->mutex_); reposts the receive.
  void poll_notices_locked();
  // Sends `notice` to every peer of this channel (caller holds state_->mutex_).
  void send_notice_locked(const Notice& notice);
  void notify_all_locked(const MpiFailure& failure);
  // kMismatch failure if a peer returned before joining collective `seq`.
  std::optional<MpiFailure> finished_peer(const WaitFor& what) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = kFirstScheduleTag;  // MPI_TAG_UB
  std::vector<int> process_ranks_;  // group rank -> process rank
  std::shared_ptr<MpiRankState> state_;
  std::unique_ptr<Notice> incoming_;  // the buffer of the posted notice receive
  MPI_Request notice_request_ = MPI_REQUEST_NULL;
  std::vector<std::pair<MPI_Request, std::unique_ptr<Notice>>> outgoing_;  // notices being sent
  std::map<int, int64_t> finished_;    // group rank -> collectives it issued before returning
  std::atomic<int64_t> issued_{0};     // collectives issued on this group
  std::atomic<int64_t> completed_{0};  // of those, completed on this rank
};

}  // namespace dpscope::detail
