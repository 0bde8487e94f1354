// How many threads the CPU's matrix products use (OpenBLAS's pool), and the rule that keeps threads
// computing at once from fighting over them.
//
// OpenBLAS runs one product at a time on its pool: rank threads (spawn: one per simulated GPU) or
// DataParallel's replica threads multiplying at once queue for the pool and spin (sched_yield)
// while they wait. An 8-rank DDP run on a 2-core machine took 3.4x as long as with one BLAS thread
// per rank (docs/benchmarks-history.md, "CPU threads"). PyTorch meets the same problem the same way: torchrun
// gives each of its processes OMP_NUM_THREADS=1. Here, while ConcurrentCompute scopes are alive,
// every product uses max(1, budget / workers) threads: `budget` is set_num_threads()'s, else
// OpenBLAS's own (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the cores it may run on), and
// `workers` the threads computing at once (1, plus each scope's workers beyond the one it replaces).
//
// Thread semantics: every function is thread-safe. The thread count is the process's (OpenBLAS has
// no per-thread setting), so scopes change it for every thread: open them where the threads are
// started, before any of them computes, and close them after they are joined (spawn_ranks and
// DataParallel's run_parallel do).
#pragma once

namespace dpscope::kernels {

// The threads one matrix product uses now (torch.get_num_threads()).
int get_num_threads();

// The threads a product may use when one thread computes at a time (1 or more).
int num_threads_budget();

// Sets that budget (torch.set_num_threads()); `threads` below 1 is a kInvalidArgument error.
void set_num_threads(int threads);

// While alive, the calling thread's work is done by `workers` threads at once (it waits for them,
// or is one of them): each product's share of the budget shrinks accordingly. Scopes nest.
class ConcurrentCompute {
 public:
  explicit ConcurrentCompute(int workers);
  ~ConcurrentCompute();
  ConcurrentCompute(const ConcurrentCompute&) = delete;
  ConcurrentCompute& operator=(const ConcurrentCompute&) = delete;

 private:
  int added_ = 0;  // workers this scope added to the process's count
};

}  // namespace dpscope::kernels
