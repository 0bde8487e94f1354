// ThreadBudget: one test's budget of matrix-product threads (kernels/cpu_threads.hpp), the process's
// put back when it ends.
#pragma once

#include "dpscope/kernels/cpu_threads.hpp"

namespace dpscope::testing {

class ThreadBudget {
 public:
  explicit ThreadBudget(int threads) : threads_(threads), saved_(kernels::num_threads_budget()) {
    kernels::set_num_threads(threads);
  }
  ~ThreadBudget() { kernels::set_num_threads(saved_); }
  ThreadBudget(const ThreadBudget&) = delete;
  ThreadBudget& operator=(const ThreadBudget&) = delete;

  // False when this OpenBLAS runs on one thread whatever it is told (a serial build): skip then.
  bool took_effect() const { return kernels::get_num_threads() == threads_; }

 private:
  int threads_;
  int saved_;
};

}  // namespace dpscope::testing
