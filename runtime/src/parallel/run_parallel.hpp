// run_parallel(): one host thread per item, joined, with the first failure re-raised naming it.
// DataParallel's parallel_apply and backward use it (PyTorch's parallel_apply does the same).
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/kernels/cpu_threads.hpp"

namespace dpscope::detail {

// Calls fn(i) for i in [0, count) on `count` threads (the caller's thread runs i = 0) and waits for
// all. If any throws, the lowest i's error is re-raised, prefixed with label(i).
inline void run_parallel(size_t count, const std::function<void(size_t)>& fn,
                         const std::function<std::string(size_t)>& label) {
  std::vector<std::exception_ptr> errors(count);
  auto guarded = [&](size_t i) {
    try {
      fn(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  // The items compute at once: each gets its share of the CPU's matrix-product threads.
  const kernels::ConcurrentCompute concurrent(static_cast<int>(count));
  std::vector<std::thread> threads;
  threads.reserve(count > 0 ? count - 1 : 0);
  for (size_t i = 1; i < count; ++i) threads.emplace_back(guarded, i);
  if (count > 0) guarded(0);
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < count; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const Error& e) {
      throw Error(e.kind(), label(i) + ": " + e.what());
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kInternal, label(i) + ": " + e.what());
    }
  }
}

}  // namespace dpscope::detail
