// FingerprintCheck (runtime/src/comm/api/fingerprint_check.hpp), the ranks' agreement on each
// collective as a wrapper around any backend, run around every backend of backend_cases.hpp that
// this machine can run as rank threads: matching calls reach the backend and give its results,
// differing calls fail on every rank with one line naming rank 0's call and the first differing
// rank's, a rank that never calls fails its peers at the timeout naming it, a failed or finished
// peer releases them at once, and the store keeps no fingerprint once every rank read it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "api/fingerprint_check.hpp"
#include "backend_cases.hpp"
#include "comm_test_util.hpp"
#include "dpscope/comm/store.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::Outcome;

class FingerprintCheckSuite : public test::BackendSuite {
 protected:
  // Runs fn(group, rank) on `n` rank threads, each over its backend of this case wrapped in
  // FingerprintCheck with one shared store; returns each rank's outcome.
  std::vector<Outcome> run(int n, const std::function<void(ProcessGroup&)>& fn) {
    InitOptions options = test::init_options(GetParam(), n, test::round_options());
    options.store = store_;
    const BackendFactory factory = find_backend(GetParam().backend);
    const std::string prefix = fmt::format("test/run{}/", runs_++);  // one per run, as nccl's init round
    std::vector<Outcome> out(static_cast<size_t>(n));
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        InitOptions mine = options;
        mine.rank = r;
        out[r] = error_of([&] {
          ProcessGroup group(detail::with_fingerprint_check(factory(mine), store_, prefix));
          fn(group);
          group.backend().rank_finished();
        });
      });
    }
    for (std::thread& t : ranks) t.join();
    return out;
  }

  std::shared_ptr<Store> store_ = std::make_shared<InMemoryStore>();
  int runs_ = 0;
};

TEST_P(FingerprintCheckSuite, MatchingCallsReachTheBackendWithItsResults) {
  for (int n : {2, 3}) {
    if (!fits(n)) continue;
    const std::vector<Outcome> out = run(n, [n](ProcessGroup& pg) {
      Tensor t = Tensor::full({4}, static_cast<float>(pg.rank() + 1), pg.device());
      pg.all_reduce(t)->wait();
      // 1 + 2 + ... + n on every rank.
      EXPECT_EQ(t.to_vector(), std::vector<float>(4, static_cast<float>(n * (n + 1) / 2)));
      Tensor b = Tensor::full({3}, pg.rank() == 1 ? 7.0f : 0.0f, pg.device());
      pg.broadcast(b, {.root = 1})->wait();
      EXPECT_EQ(b.to_vector(), std::vector<float>(3, 7.0f));
      pg.barrier()->wait();
    });
    for (const Outcome& o : out) EXPECT_EQ(o.message, "no error");
  }
}

TEST_P(FingerprintCheckSuite, DifferingCallsFailOnEveryRankNamingRank0sCallAndTheFirstDiffering) {
  if (!fits(3)) GTEST_SKIP() << "3 ranks do not fit here";
  const std::vector<Outcome> out = run(3, [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({pg.rank() == 0 ? 4 : 5}, pg.device());
    pg.all_reduce(t)->wait();
  });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, ErrorKind::kMismatch);
    EXPECT_EQ(
        o.message,
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=float32, "
        "ReduceOp=sum), but Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[5], TensorDtypes=float32, "
        "ReduceOp=sum) (ranks that differ from rank 0: [1, 2])");
  }
}

TEST_P(FingerprintCheckSuite, DifferentOpsRootsAndAlgorithmsAreTold) {
  if (!fits(2)) GTEST_SKIP() << "2 ranks do not fit here";
  const std::vector<Outcome> out = run(2, [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({2}, pg.device());
    if (pg.rank() == 0) {
      pg.broadcast(t, {.root = 0, .algorithm = Algorithm::kRing})->wait();
    } else {
      pg.broadcast(t, {.root = 1})->wait();
    }
  });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, ErrorKind::kMismatch);
    EXPECT_EQ(
        o.message,
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=BROADCAST, TensorShape=[2], TensorDtypes=float32, "
        "Root=0, Algorithm=ring), but Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=BROADCAST, TensorShape=[2], TensorDtypes=float32, "
        "Root=1) (ranks that differ from rank 0: [1])");
  }
}

TEST_P(FingerprintCheckSuite, ARankThatNeverCallsFailsItsPeersAtTheTimeoutNamingIt) {
  if (!fits(2)) GTEST_SKIP() << "2 ranks do not fit here";
  std::atomic<bool> released{false};  // rank 1 stays alive, without calling, until rank 0 is done
  const std::vector<Outcome> out = run(2, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      while (!released) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;
    }
    struct Release {
      std::atomic<bool>& flag;
      ~Release() { flag = true; }
    } release{released};
    Tensor t = Tensor::zeros({2}, pg.device());
    pg.all_reduce(t, {.timeout = Milliseconds(200)})->wait();
  });
  EXPECT_EQ(out[0].kind, ErrorKind::kTimeout);
  EXPECT_EQ(out[0].message,
            GetParam().backend +
                ": rank 0 waited 200 ms at CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, "
                "TensorShape=[2], TensorDtypes=float32, ReduceOp=sum) for ranks that never called it: [1]");
  EXPECT_EQ(out[1].message, "no error");
}

TEST_P(FingerprintCheckSuite, AFailedPeerReleasesTheOthersAtOnceNamingItsError) {
  if (!fits(2)) GTEST_SKIP() << "2 ranks do not fit here";
  const std::vector<Outcome> out = run(2, [](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      pg.backend().abort(ErrorKind::kInvalidArgument, "rank 1's data file is missing");
      throw Error(ErrorKind::kInvalidArgument, "rank 1's data file is missing");
    }
    Tensor t = Tensor::zeros({2}, pg.device());
    pg.all_reduce(t, {.timeout = Milliseconds(60000)})->wait();  // ends long before this
  });
  EXPECT_EQ(out[0].kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      out[0].message,
      "[Rank 0] ALLREDUCE (SequenceNumber=0) aborted because rank 1 failed: rank 1's data file is missing");
}

TEST_P(FingerprintCheckSuite, APeerThatReturnedWithoutCallingReleasesTheOthersAtOnce) {
  if (!fits(2)) GTEST_SKIP() << "2 ranks do not fit here";
  const std::vector<Outcome> out = run(2, [](ProcessGroup& pg) {
    if (pg.rank() == 1) return;
    pg.barrier({.timeout = Milliseconds(60000)})->wait();  // ends long before this
  });
  EXPECT_EQ(out[0].kind, ErrorKind::kMismatch);
  EXPECT_EQ(
      out[0].message,
      "[Rank 0] BARRIER (SequenceNumber=0) can never complete: rank 1 returned from its function without "
      "joining it (missing ranks: [1])");
  EXPECT_EQ(out[1].message, "no error");
}

TEST_P(FingerprintCheckSuite, TheStoreKeepsNoFingerprintOnceEveryRankReadIt) {
  if (!fits(2)) GTEST_SKIP() << "2 ranks do not fit here";
  const int64_t before = store_->num_keys();
  run(2, [](ProcessGroup&) {});  // each rank leaves its "finished" key
  const int64_t idle = store_->num_keys() - before;
  const std::vector<Outcome> out = run(2, [](ProcessGroup& pg) {
    for (int i = 0; i < 5; ++i) pg.barrier()->wait();
  });
  for (const Outcome& o : out) EXPECT_EQ(o.message, "no error");
  EXPECT_EQ(store_->num_keys() - before, 2 * idle);
}

TEST(FingerprintCheck, WithoutAStoreTheBackendIsLeftAsItIs) {
  auto world = SimWorld::create(1, test::round_options());
  std::unique_ptr<Backend> inner = find_backend("sim")({.rank = 0, .world_size = 1, .world = world});
  Backend* raw = inner.get();
  EXPECT_EQ(detail::with_fingerprint_check(std::move(inner), nullptr, "x/").get(), raw);
}

INSTANTIATE_TEST_SUITE_P(Backends, FingerprintCheckSuite, ::testing::ValuesIn(test::backend_cases()),
                         test::case_name);

}  // namespace
}  // namespace dpscope
