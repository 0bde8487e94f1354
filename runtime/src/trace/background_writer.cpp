// BackgroundWriter: the recorder's writing thread (background_writer.hpp).
#include "background_writer.hpp"

#include <utility>

namespace dpscope::trace {

BackgroundWriter::BackgroundWriter(std::unique_ptr<TraceFileWriter> file)
    : file_(std::move(file)), thread_([this] { run(); }) {}

BackgroundWriter::~BackgroundWriter() {
  try {
    close();
  } catch (...) {
    // Destructors must not throw; close() reports to callers that call it.
  }
}

uint64_t BackgroundWriter::hand_off(std::string& lines, bool flush) {
  std::unique_lock lock(mutex_);
  written_.wait(lock, [&] { return queued_.size() < kMaxQueuedBytes || stop_ || failure_ != nullptr; });
  if (stop_ || failure_ != nullptr) {
    // Nothing more can be written (closed, or writing failed: wait_written and close say so).
    lines.clear();
    return written_up_to_;
  }
  if (queued_.empty()) {
    queued_.swap(lines);  // `lines` takes the spare buffer: no copy, and its capacity is reused
  } else {
    queued_.append(lines);
  }
  lines.clear();
  flush_queued_ = flush_queued_ || flush;
  const uint64_t ticket = ++handed_;
  // A lingering thread takes these lines within kLinger by itself: no wake-up call (a futex system
  // call per training step, on the launching thread).
  const bool wake = !lingering_;
  lock.unlock();
  if (wake) work_.notify_one();
  return ticket;
}

void BackgroundWriter::wait_written(uint64_t ticket) {
  std::unique_lock lock(mutex_);
  if (written_up_to_ < ticket && lingering_) work_.notify_one();  // a waiter does not wait out the linger
  written_.wait(lock, [&] { return written_up_to_ >= ticket || failure_ != nullptr; });
  if (failure_ != nullptr) std::rethrow_exception(failure_);
}

void BackgroundWriter::rethrow_failure() {
  std::lock_guard lock(mutex_);
  if (failure_ != nullptr) std::rethrow_exception(failure_);
}

void BackgroundWriter::run() {
  std::string writing;
  std::unique_lock lock(mutex_);
  const auto has_work = [&] { return handed_ != written_up_to_ || stop_; };
  for (;;) {
    if (!has_work()) {
      // A training loop hands lines over every step: wait for the next ones a while without asking
      // for a wake-up call, then sleep until woken.
      lingering_ = true;
      work_.wait_for(lock, kLinger, has_work);
      lingering_ = false;
      work_.wait(lock, has_work);
    }
    if (handed_ == written_up_to_) return;  // stopped, and everything is written
    const uint64_t up_to = handed_;
    const bool flush = std::exchange(flush_queued_, false);
    writing.swap(queued_);
    lock.unlock();
    std::exception_ptr failure;
    try {
      file_->write(writing);
      if (flush) file_->flush();  // zstd: ends the block, so a live reader decodes every line so far
    } catch (...) {
      failure = std::current_exception();
    }
    writing.clear();
    lock.lock();
    written_up_to_ = up_to;
    if (failure != nullptr && failure_ == nullptr) failure_ = failure;
    written_.notify_all();
    if (failure_ != nullptr) return;  // nothing more is written; callers hear of it
  }
}

void BackgroundWriter::close() {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
  written_.notify_all();
  if (failure_ != nullptr) {
    file_.reset();  // closes what it can, quietly
    std::rethrow_exception(failure_);
  }
  file_->close();  // zstd: ends the frame; throws kWriteFailed "cannot write trace 'PATH': REASON"
}

}  // namespace dpscope::trace
