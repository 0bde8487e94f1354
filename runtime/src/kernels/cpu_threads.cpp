// The CPU's matrix-product threads (cpu_threads.hpp): OpenBLAS's pool sized from the budget and the
// number of threads computing at once.
#include "dpscope/kernels/cpu_threads.hpp"

#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "dpscope/base/error.hpp"

namespace dpscope::kernels {

namespace {

struct Threads {
  std::mutex mutex;
  int budget = 0;   // guarded; 0 until first read from OpenBLAS
  int workers = 1;  // guarded: threads computing at once
};

Threads& threads() {
  static Threads t;
  return t;
}

// Under the lock: the budget, read from OpenBLAS the first time (its environment variables or cores).
int budget_locked(Threads& t) {
  if (t.budget == 0) t.budget = std::max(1, openblas_get_num_threads());
  return t.budget;
}

// Under the lock: gives OpenBLAS each worker's share. Only ever lowered below the budget, so
// OpenBLAS never has to start threads here (its pool has the budget's already).
void apply_locked(Threads& t) {
  const int share = std::max(1, budget_locked(t) / t.workers);
  if (openblas_get_num_threads() != share) openblas_set_num_threads(share);
}

}  // namespace

int get_num_threads() { return std::max(1, openblas_get_num_threads()); }

int num_threads_budget() {
  Threads& t = threads();
  std::lock_guard lock(t.mutex);
  return budget_locked(t);
}

void set_num_threads(int count) {
  DPS_CHECK(count >= 1, ErrorKind::kInvalidArgument,
            "set_num_threads: the thread count must be at least 1, got {}", count);
  Threads& t = threads();
  std::lock_guard lock(t.mutex);
  // Raised: OpenBLAS starts the threads it lacks now, with the budget as its count (apply_locked
  // then lowers it to a worker's share if threads compute at once).
  if (count > budget_locked(t)) openblas_set_num_threads(count);
  t.budget = count;
  apply_locked(t);
}

ConcurrentCompute::ConcurrentCompute(int workers) : added_(std::max(0, workers - 1)) {
  if (added_ == 0) return;
  Threads& t = threads();
  std::lock_guard lock(t.mutex);
  t.workers += added_;
  apply_locked(t);
}

ConcurrentCompute::~ConcurrentCompute() {
  if (added_ == 0) return;
  Threads& t = threads();
  std::lock_guard lock(t.mutex);
  t.workers -= added_;
  apply_locked(t);
}

}  // namespace dpscope::kernels
