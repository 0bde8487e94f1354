// The CPU's matrix-product threads: the budget, each concurrent worker's share of it, nesting, and
// that OpenBLAS itself follows (get_num_threads reads OpenBLAS, not our bookkeeping).
#include "dpscope/kernels/cpu_threads.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include "dpscope/base/error.hpp"
#include "support/thread_budget.hpp"

namespace dpscope {
namespace {

// Every test sets its own budgets; the process's is put back afterwards.
class CpuThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!budget_.took_effect()) GTEST_SKIP() << "this OpenBLAS runs on one thread only (a serial build)";
  }

 private:
  testing::ThreadBudget budget_{2};
};

TEST_F(CpuThreads, OneWorkerUsesTheWholeBudget) {
  kernels::set_num_threads(8);
  EXPECT_EQ(kernels::num_threads_budget(), 8);
  EXPECT_EQ(kernels::get_num_threads(), 8);
  kernels::set_num_threads(3);
  EXPECT_EQ(kernels::get_num_threads(), 3);
}

TEST_F(CpuThreads, ConcurrentWorkersShareTheBudgetAndGiveItBack) {
  kernels::set_num_threads(8);
  {
    const kernels::ConcurrentCompute four(4);
    EXPECT_EQ(kernels::get_num_threads(), 2);
    {
      const kernels::ConcurrentCompute nested(3);  // one of the four starts three: 6 at once
      EXPECT_EQ(kernels::get_num_threads(), 1);
    }
    EXPECT_EQ(kernels::get_num_threads(), 2);
    EXPECT_EQ(kernels::num_threads_budget(), 8);
  }
  EXPECT_EQ(kernels::get_num_threads(), 8);
}

TEST_F(CpuThreads, MoreWorkersThanTheBudgetGetOneThreadEach) {
  kernels::set_num_threads(2);
  const kernels::ConcurrentCompute eight(8);
  EXPECT_EQ(kernels::get_num_threads(), 1);
}

TEST_F(CpuThreads, ABudgetSetWhileWorkersRunIsShared) {
  kernels::set_num_threads(2);
  const kernels::ConcurrentCompute two(2);
  kernels::set_num_threads(6);
  EXPECT_EQ(kernels::get_num_threads(), 3);
}

TEST_F(CpuThreads, OneWorkerOrNoneChangesNothing) {
  kernels::set_num_threads(4);
  const kernels::ConcurrentCompute one(1);
  const kernels::ConcurrentCompute none(0);
  EXPECT_EQ(kernels::get_num_threads(), 4);
}

TEST_F(CpuThreads, SharingLeavesTheCallersCpuAffinityAlone) {
  // OpenBLAS pins its calling thread when going from one thread to several unless built without
  // affinity (Debian's is): a pinned rank thread would run every later product on one core.
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  kernels::set_num_threads(4);
  { const kernels::ConcurrentCompute eight(8); }
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST_F(CpuThreads, ABudgetBelowOneIsRefused) {
  try {
    kernels::set_num_threads(0);
    FAIL() << "expected kInvalidArgument";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(), "set_num_threads: the thread count must be at least 1, got 0");
  }
}

}  // namespace
}  // namespace dpscope
