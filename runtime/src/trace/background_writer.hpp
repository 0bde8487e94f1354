// BackgroundWriter: writes a trace file on a thread of its own (private to the trace recorder).
//
// The recorder used to write its lines on the thread that flushed them: a `write` call, or zstd
// compressing and ending a block, 5-9 us once per training step, and 1 MiB at a time, under the
// recorder's lock, whenever the lines piled up (every other emitting thread waited meanwhile). The
// recorder now hands the lines over (a buffer swap) and this thread writes them, in the order they
// were handed over. A hand-off may ask for a flush, after which a live reader can decode every line
// handed over so far. Memory is bounded: a hand-off waits while more than kMaxQueuedBytes wait to
// be written (a slow disk slows the run rather than filling memory). After each write the thread
// lingers kLinger for more lines, which then need no wake-up call: a training loop's per-step
// hand-off costs its thread a buffer swap, not a system call (a followed trace lags <= kLinger more).
// Threads: every member is thread-safe; close() is called once, after the last hand-off.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dpscope/trace_tools/compressed.hpp"

namespace dpscope::trace {

class BackgroundWriter {
 public:
  static constexpr size_t kMaxQueuedBytes = size_t{64} << 20;
  static constexpr std::chrono::microseconds kLinger{2000};

  explicit BackgroundWriter(std::unique_ptr<TraceFileWriter> file);
  ~BackgroundWriter();  // close() without reporting errors
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Takes `lines` (whole lines; left empty, with a spare buffer's capacity) to be written, then
  // flushed when `flush`. Returns the hand-off's ticket for wait_written().
  uint64_t hand_off(std::string& lines, bool flush);
  // Waits until hand-off `ticket` and those before it are written (and flushed, if they asked).
  // Rethrows what the writing thread failed with.
  void wait_written(uint64_t ticket);
  // Rethrows what the writing thread failed with (kWriteFailed "cannot write trace 'PATH': No space
  // left on device"), if it failed; does not wait.
  void rethrow_failure();
  // Writes what was handed over, stops the thread and closes the file. Throws what writing or
  // closing failed with (kWriteFailed, with the system's reason: TraceFileWriter).
  void close();

 private:
  void run();

  std::unique_ptr<TraceFileWriter> file_;  // used by the writing thread only, then by close()
  std::mutex mutex_;
  std::condition_variable work_;     // a hand-off, or stop
  std::condition_variable written_;  // a batch written
  std::string queued_;               // handed over, not yet taken by the thread
  bool flush_queued_ = false;
  uint64_t handed_ = 0;  // tickets given out
  uint64_t written_up_to_ = 0;
  bool stop_ = false;
  bool lingering_ = false;  // the thread waits kLinger for lines that need not wake it
  std::exception_ptr failure_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace dpscope::trace
