// AsyncBackend (runtime/src/comm/async/async_backend.hpp): the cuda backend's comm worker, tested here on
// simulated devices so that every build, the sanitizer ones too, runs it. A rank's collectives run
// on its worker thread: all_reduce returns before its peers have even arrived, results and order
// are those of the wrapped backend, and a failure reaches wait() instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "async/async_backend.hpp"
#include "comm_test_util.hpp"
#include "sim/sim_backend.hpp"

namespace dpscope::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Runs fn(rank, backend) on one thread per rank, each with an AsyncBackend over the sim backend.
void run_async_ranks(int n, Milliseconds timeout, const std::function<void(int, Backend&)>& fn) {
  std::shared_ptr<SimWorld> world = SimWorld::create(n, test::round_options(timeout));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      AsyncBackend backend(std::make_unique<SimBackend>(world, world->state().default_group, r),
                           std::make_shared<CommWorker>());
      fn(r, backend);
      backend.rank_finished();
    });
  for (std::thread& t : threads) t.join();
}

TEST(AsyncBackend, CollectivesKeepTheirOrderAndResults) {
  run_async_ranks(3, Milliseconds(20000), [](int rank, Backend& backend) {
    Tensor a = Tensor::full({1000}, static_cast<float>(rank + 1), backend.device());
    Tensor b = Tensor::full({10}, static_cast<float>(10 * rank), backend.device());
    const std::shared_ptr<Work> first = backend.all_reduce(a, {.op = ReduceOp::kSum});
    const std::shared_ptr<Work> second = backend.broadcast(b, {.root = 2});
    second->wait();  // waiting for the later one first is fine: the worker runs them in order
    first->wait();
    EXPECT_TRUE(first->is_success());
    EXPECT_EQ(first->op_type(), OpType::kAllReduce);
    EXPECT_EQ(second->sequence_number(), first->sequence_number() + 1);
    EXPECT_EQ(a.to_vector(), std::vector<float>(1000, 6.0f)) << "rank " << rank;
    EXPECT_EQ(b.to_vector(), std::vector<float>(10, 20.0f)) << "rank " << rank;
    // A synchronous call queued behind them sees their results.
    backend.barrier({})->wait();
  });
}

TEST(AsyncBackend, AllReduceReturnsBeforeItsPeersArrive) {
  // Rank 1 calls all_reduce only once rank 0's call has returned: a blocking all_reduce on rank 0
  // would wait for rank 1 forever (here: until rank 1 gives up after 10 s and the test fails).
  std::atomic<bool> rank0_returned{false};
  run_async_ranks(2, Milliseconds(20000), [&](int rank, Backend& backend) {
    Tensor t = Tensor::full({16}, 1.0f, backend.device());
    if (rank == 1) {
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (!rank0_returned.load() && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(rank0_returned.load()) << "rank 0's all_reduce did not return before rank 1 called";
    }
    const std::shared_ptr<Work> work = backend.all_reduce(t, {.op = ReduceOp::kSum});
    if (rank == 0) {
      EXPECT_FALSE(work->is_completed()) << "rank 1 has not called yet";
      rank0_returned.store(true);
    }
    work->wait();
    EXPECT_TRUE(work->is_completed());
    EXPECT_EQ(t.to_vector(), std::vector<float>(16, 2.0f));
  });
}

TEST(AsyncBackend, AMismatchReachesWaitOnEveryRank) {
  run_async_ranks(2, Milliseconds(5000), [](int rank, Backend& backend) {
    Tensor t = Tensor::zeros({rank == 0 ? 4 : 8}, backend.device());
    const std::shared_ptr<Work> work = backend.all_reduce(t, {.op = ReduceOp::kSum});
    try {
      work->wait();
      ADD_FAILURE() << "rank " << rank << ": a mismatched all_reduce succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kMismatch) << e.what();
    }
    EXPECT_TRUE(work->is_completed());
    EXPECT_FALSE(work->is_success());
    EXPECT_NE(work->exception(), nullptr);
  });
}

}  // namespace
}  // namespace dpscope::detail
