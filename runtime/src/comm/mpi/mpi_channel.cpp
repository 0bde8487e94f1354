// MpiChannel (mpi_channel.hpp): the polling wait, timeouts and the notices between ranks.
#include "mpi_channel.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>

namespace dpscope::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Polls that only yield before the loop starts sleeping between them (file comment).
constexpr auto kYieldingFor = std::chrono::milliseconds(1000);  // see the header: rounds follow at once
constexpr auto kSleepBetweenPolls = std::chrono::microseconds(50);

enum class NoticeType : int32_t { kFailed = 1, kFinished = 2 };

}  // namespace

void keep_forever(std::shared_ptr<void> buffers) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed (header comment)
  std::lock_guard lock(mutex);
  kept->push_back(std::move(buffers));
}

void check_mpi(int rc, const char* call, const std::string& context) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ErrorKind::kInternal,
              fmt::format("{}: {} failed: {}", context, call, std::string(text, length)));
}

// ---- the process's first failure ----

namespace {
std::atomic<int> g_first_failure_kind{-1};  // an ErrorKind, -1 while no group of this process failed
void remember_failure(ErrorKind kind) {
  int none = -1;
  g_first_failure_kind.compare_exchange_strong(none, static_cast<int>(kind));
}
}  // namespace

std::optional<ErrorKind> first_failure_in_process() {
  const int kind = g_first_failure_kind.load();
  return kind < 0 ? std::nullopt : std::optional<ErrorKind>(static_cast<ErrorKind>(kind));
}

// ---- MpiRankState ----

std::optional<MpiFailure> MpiRankState::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

bool MpiRankState::fail(MpiFailure failure) {
  std::lock_guard lock(mutex_);
  if (failure_) return false;
  remember_failure(failure.kind);
  failure_ = std::move(failure);
  return true;
}

// ---- MpiChannel ----

// What travels under kNoticeTag (MPI_BYTE; both ends run the same build).
struct MpiChannel::Notice {
  NoticeType type = NoticeType::kFailed;
  int32_t kind = 0;      // ErrorKind of a failure
  int64_t issued = 0;    // kFinished: collectives issued; kFailed: collectives completed (on this group)
  char text[1008] = {};  // kFailed: the sender's message, truncated, NUL-terminated
};

MpiChannel::MpiChannel(MPI_Comm comm, std::shared_ptr<MpiRankState> state, std::vector<int> process_ranks)
    : comm_(comm),
      process_ranks_(std::move(process_ranks)),
      state_(std::move(state)),
      incoming_(std::make_unique<Notice>()) {
  const std::string context = "mpi: setting up a communicator";
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", context);
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", context);
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", context);
  int* tag_ub = nullptr;
  int has_tag_ub = 0;
  check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &has_tag_ub), "MPI_Comm_get_attr", context);
  if (has_tag_ub && tag_ub != nullptr) tag_ub_ = std::max(*tag_ub, kFirstScheduleTag);
  if (process_ranks_.empty()) {
    process_ranks_.resize(static_cast<size_t>(size_));
    std::iota(process_ranks_.begin(), process_ranks_.end(), 0);
  }
  DPS_ASSERT(static_cast<int>(process_ranks_.size()) == size_, "{} process ranks for a group of {}",
             process_ranks_.size(), size_);
  check_mpi(MPI_Irecv(incoming_.get(), sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, kNoticeTag, comm_,
                      &notice_request_),
            "MPI_Irecv", context);
  std::lock_guard lock(state_->mutex_);
  state_->channels_.push_back(this);
}

MpiChannel::~MpiChannel() {
  std::lock_guard lock(state_->mutex_);
  auto& channels = state_->channels_;
  channels.erase(std::remove(channels.begin(), channels.end(), this), channels.end());
  if (notice_request_ != MPI_REQUEST_NULL) {
    // A cancelled receive completes locally.
    MPI_Cancel(&notice_request_);
    MPI_Wait(&notice_request_, MPI_STATUS_IGNORE);
  }
  for (auto& [request, notice] : outgoing_) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    // A notice still in flight keeps its buffer: MPI may read it after we are gone.
    if (!done) static_cast<void>(notice.release());
  }
  // After a failure the communicator may hold requests that never complete, and OpenMPI's
  // nonblocking collectives go on progressing them: freeing it could crash a later MPI call. A
  // failed group's communicator is kept (like its buffers, keep_forever).
  if (!state_->failure_) MPI_Comm_free(&comm_);
}

int MpiChannel::schedule_tag(const std::string& fingerprint) const {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a: the same on every rank, whatever the build
  for (const char c : fingerprint) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const auto span = static_cast<uint64_t>(tag_ub_ - kFirstScheduleTag) + 1;
  return kFirstScheduleTag + static_cast<int>(hash % span);
}

std::string MpiChannel::failure_message(const WaitFor& what, const std::string& why) const {
  return fmt::format("[Rank {}] mpi {} (SequenceNumber={}) failed: {}", rank_, to_string(what.op), what.seq,
                     why);
}

void MpiChannel::throw_if_failed(const WaitFor& what) {
  const std::optional<MpiFailure> failure = state_->failure();
  if (!failure) return;
  const bool peer_joined = failure->channel == this && what.collective && what.seq < failure->peer_completed;
  if (peer_joined && Clock::now() - failure->noticed < kFailureGrace) return;
  throw Error(failure->kind, failure_message(what, failure->message));
}

void MpiChannel::wait(std::vector<MPI_Request>& requests, const WaitFor& what, Milliseconds timeout,
                      std::vector<MPI_Status>* statuses, Clock::time_point begun) {
  if (statuses != nullptr) statuses->resize(requests.size());
  for (;;) {
    // Notices first: a request given up on by a failed peer may still complete, and a rank must not
    // go on as if a failed group were healthy.
    {
      std::unique_lock lock(state_->mutex_, std::try_to_lock);
      if (lock.owns_lock()) poll_notices_locked();
    }
    throw_if_failed(what);
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                               statuses != nullptr ? statuses->data() : MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      std::string message;
      try {
        check_mpi(rc, "MPI_Testall", failure_message(what, "waiting for it"));
      } catch (const Error& e) {
        message = e.what();
      }
      fail_and_notify({ErrorKind::kInternal, message});
      throw Error(ErrorKind::kInternal, message);
    }
    if (done) return;
    if (const std::optional<MpiFailure> gone = finished_peer(what)) {
      state_->fail({gone->kind,
                    "aborted by an earlier failure on this rank: " + failure_message(what, gone->message)});
      throw Error(gone->kind, failure_message(what, gone->message));
    }
    const auto waited = Clock::now() - begun;
    const auto waited_ms = std::chrono::duration_cast<Milliseconds>(waited);
    if (waited_ms >= timeout) {
      const std::string message = failure_message(
          what, fmt::format("Watchdog caught collective operation timeout: it ran for {} milliseconds "
                            "(Timeout(ms)={}) without its peers completing it",
                            waited_ms.count(), timeout.count()));
      fail_and_notify({ErrorKind::kTimeout, message});
      throw Error(ErrorKind::kTimeout, message);
    }
    if (waited < kYieldingFor) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kSleepBetweenPolls);
    }
  }
}

std::optional<MpiFailure> MpiChannel::finished_peer(const WaitFor& what) const {
  if (!what.collective) return std::nullopt;
  std::lock_guard lock(state_->mutex_);
  for (const auto& [peer, issued] : finished_)
    if (issued <= what.seq)
      return MpiFailure{ErrorKind::kMismatch,
                        fmt::format("it can never complete: rank {} returned from its function after {} "
                                    "collectives without joining it",
                                    peer, issued)};
  return std::nullopt;
}

void MpiChannel::poll_notices_locked() {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int sent = 0;
    MPI_Test(&it->first, &sent, MPI_STATUS_IGNORE);
    it = sent ? outgoing_.erase(it) : it + 1;
  }
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (notice_request_ == MPI_REQUEST_NULL || MPI_Test(&notice_request_, &arrived, &status) != MPI_SUCCESS ||
        !arrived)
      return;
    const Notice& notice = *incoming_;
    if (notice.type == NoticeType::kFinished) {
      finished_[status.MPI_SOURCE] = notice.issued;
    } else if (!state_->failure_) {
      remember_failure(static_cast<ErrorKind>(notice.kind));
      const std::string text(notice.text, strnlen(notice.text, sizeof(notice.text)));
      state_->failure_ =
          MpiFailure{static_cast<ErrorKind>(notice.kind),
                     fmt::format("aborted because rank {} failed: {}", status.MPI_SOURCE, text), this,
                     notice.issued, Clock::now()};
    }
    *incoming_ = Notice{};
    if (MPI_Irecv(incoming_.get(), sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, kNoticeTag, comm_,
                  &notice_request_) != MPI_SUCCESS)
      notice_request_ = MPI_REQUEST_NULL;
  }
}

void MpiChannel::send_notice_locked(const Notice& notice) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto copy = std::make_unique<Notice>(notice);
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(copy.get(), sizeof(Notice), MPI_BYTE, peer, kNoticeTag, comm_, &request) == MPI_SUCCESS)
      outgoing_.emplace_back(request, std::move(copy));
  }
}

void MpiChannel::notify_all_locked(const MpiFailure& failure) {
  Notice notice{.type = NoticeType::kFailed, .kind = static_cast<int32_t>(failure.kind)};
  const size_t length = std::min(failure.message.size(), sizeof(notice.text) - 1);
  std::memcpy(notice.text, failure.message.data(), length);
  for (MpiChannel* channel : state_->channels_) {
    notice.issued = channel->completed_;
    channel->send_notice_locked(notice);
  }
}

void MpiChannel::abort(ErrorKind kind, const std::string& message) {
  std::lock_guard lock(state_->mutex_);
  if (state_->failure_) return;  // told the peers already
  remember_failure(kind);
  state_->failure_ = MpiFailure{kind, "aborted by an earlier failure on this rank: " + message};
  notify_all_locked({kind, message});
}

void MpiChannel::fail_and_notify(const MpiFailure& failure) {
  std::lock_guard lock(state_->mutex_);
  if (state_->failure_) return;
  remember_failure(failure.kind);
  state_->failure_ =
      MpiFailure{failure.kind, "aborted by an earlier failure on this rank: " + failure.message};
  notify_all_locked(failure);
}

void MpiChannel::notify_finished() {
  std::lock_guard lock(state_->mutex_);
  send_notice_locked(Notice{.type = NoticeType::kFinished, .issued = issued_});
}

}  // namespace dpscope::detail
