// The mpi backend never hangs: a rank that skips a collective makes the others time out; a rank
// that fails (abort), returns early (rank_finished) or runs another collective makes the others fail
// fast, each with one line naming the operation, the rank and the reason. Run by ctest mpi_failures_*
// (separately from the collectives: a failed communicator keeps requests MPI never completes).
// MpiKill (disabled unless asked for, ctest mpi_killed_rank_*) kills a rank's process mid-collective.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>

#include "dpscope/comm/rank_agreement.hpp"
#include "mpi_world.hpp"

namespace dpscope {
namespace {

using test::join;
using test::mpi_size;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

struct Caught {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message = "no error";
  Milliseconds after{0};
};

Caught caught(const std::function<void()>& f) {
  const auto begun = Clock::now();
  Caught c;
  try {
    f();
  } catch (const Error& e) {
    c = {e.kind(), e.what()};
  }
  c.after = std::chrono::duration_cast<Milliseconds>(Clock::now() - begun);
  return c;
}

class MpiFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    DPS_REQUIRE_MPIRUN();
    if (mpi_size() < 2) GTEST_SKIP() << "needs mpirun -np 2 or more";
  }
};

TEST_F(MpiFailures, ASkippedCollectiveTimesOutOnTheOthers) {
  const auto pg = join(mpi_size(), Milliseconds(300));
  Tensor t = Tensor::full({8}, 1.0f, pg->device());
  if (pg->rank() == 1) {
    std::this_thread::sleep_for(Milliseconds(800));  // arrives long past the others' timeout
    // The peers told it they gave up: it fails at once instead of timing out in turn.
    const Caught late = caught([&] { pg->all_reduce(t)->wait(); });
    EXPECT_EQ(late.kind, ErrorKind::kTimeout);
    EXPECT_THAT(late.message,
                HasSubstr("[Rank 1] mpi ALLREDUCE (SequenceNumber=0) failed: aborted because rank"));
    EXPECT_THAT(late.message, HasSubstr("Watchdog caught collective operation timeout"));
    EXPECT_LT(late.after.count(), 250);
    return;
  }
  const Caught c = caught([&] { pg->all_reduce(t)->wait(); });
  EXPECT_EQ(c.kind, ErrorKind::kTimeout) << c.message;
  // Its own watchdog, or (more than 2 ranks) a peer's notice that came first.
  EXPECT_THAT(c.message,
              HasSubstr(fmt::format("[Rank {}] mpi ALLREDUCE (SequenceNumber=0) failed: ", pg->rank())));
  EXPECT_THAT(c.message, HasSubstr("Watchdog caught collective operation timeout: it ran for"));
  // Its own watchdog waits out the whole timeout; a peer's notice (more than 2 ranks) may come
  // first, from a peer whose collective started a little earlier.
  if (c.message.find("aborted because rank") == std::string::npos) {
    EXPECT_GE(c.after.count(), 300) << c.message;
  }
  EXPECT_LT(c.after.count(), 5000);
  // Later calls on the failed group fail at once.
  const Caught later = caught([&] { pg->barrier()->wait(); });
  EXPECT_EQ(later.kind, ErrorKind::kTimeout);
  EXPECT_THAT(later.message, HasSubstr("failed: aborted"));
  EXPECT_LT(later.after.count(), 250);
}

TEST_F(MpiFailures, AnAbortedRankIsReportedNotWaitedFor) {
  const auto pg = join(mpi_size(), Milliseconds(20000));
  pg->barrier()->wait();
  if (pg->rank() == 1) {
    pg->backend().abort(ErrorKind::kDevice, "rank 1 ran out of memory");
    return;
  }
  Tensor t = Tensor::full({8}, 1.0f, pg->device());
  const Caught c = caught([&] { pg->all_reduce(t)->wait(); });
  EXPECT_EQ(c.kind, ErrorKind::kDevice);
  EXPECT_EQ(c.message,
            fmt::format("[Rank {}] mpi ALLREDUCE (SequenceNumber=1) failed: aborted because rank 1 "
                        "failed: rank 1 ran out of memory",
                        pg->rank()));
  EXPECT_LT(c.after.count(), 5000) << "long before the 20 s timeout";
}

TEST_F(MpiFailures, MismatchedCollectivesFailOnEveryRank) {
  const auto pg = join(mpi_size(), Milliseconds(20000));
  Tensor t = Tensor::full({8}, 1.0f, pg->device());
  const Caught c = caught([&] {
    if (pg->rank() == 1) {
      pg->broadcast(t, {.root = 0})->wait();
    } else {
      pg->all_reduce(t)->wait();
    }
  });
  EXPECT_EQ(c.kind, ErrorKind::kMismatch) << c.message;
  EXPECT_THAT(c.message, HasSubstr("Detected mismatch between collectives on ranks"));
  EXPECT_THAT(c.message, HasSubstr("CollectiveFingerPrint(SequenceNumber=0, OpType=BROADCAST"));
  EXPECT_THAT(c.message, HasSubstr("CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE"));
  EXPECT_LT(c.after.count(), 5000) << "long before the 20 s timeout";
}

// Collectives of different sizes: the fingerprints are compared before MPI sees the collective, so
// OpenMPI never matches them (it failed inside with MPI_ERR_TRUNCATE and printed "MPI Error in NBC
// subrequest ..." to stderr).
TEST_F(MpiFailures, CollectivesOfDifferentSizesFailBeforeOpenMpiMatchesThem) {
  const auto pg = join(mpi_size(), Milliseconds(20000));
  Tensor t = Tensor::full({pg->rank() == 1 ? 8 : 4096}, 1.0f, pg->device());
  ::testing::internal::CaptureStderr();
  const Caught c = caught([&] { pg->all_reduce(t)->wait(); });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.kind, ErrorKind::kMismatch) << c.message;
  EXPECT_THAT(c.message, HasSubstr("Detected mismatch between collectives on ranks"));
  EXPECT_EQ(printed, "") << "OpenMPI's own text";
}

// The settings of `dpscope train` and `bench` as processes (comm/rank_agreement.hpp): the rank whose
// flag differs names it with both values, every other rank names that rank.
TEST_F(MpiFailures, RanksStartedWithAnotherFlagAllStopNamingIt) {
  const auto pg = join(mpi_size(), Milliseconds(20000));
  const int last = pg->size() - 1;
  const Caught c = caught([&] {
    agree_on_settings(*pg, {{"-b", "8"}, {"-e", pg->rank() == last ? "2048" : "1024"}});
  });
  EXPECT_EQ(c.kind, ErrorKind::kMismatch) << c.message;
  if (pg->rank() == last) {
    EXPECT_THAT(c.message, HasSubstr("-e is 2048 here but 1024 on rank 0"));
  } else {
    EXPECT_THAT(c.message, HasSubstr(fmt::format("rank {} runs another configuration than rank 0", last)));
  }
  EXPECT_LT(c.after.count(), 5000);
}

// run_as_rank(): a rank whose own work fails aborts the group; a peer waiting for it in a
// collective fails at once, naming it and its reason (it waited in MPI_Finalize and the model check).
TEST_F(MpiFailures, ARankThatFailsInRunAsRankAbortsItsPeers) {
  const auto pg = join(mpi_size(), Milliseconds(20000));
  const Caught c = caught([&] {
    run_as_rank(*pg, [&] {
      if (pg->rank() == 1) throw Error(ErrorKind::kUsage, "--resume: no checkpoint in 'ckpt'");
      Tensor t = Tensor::full({8}, 1.0f, pg->device());
      pg->all_reduce(t)->wait();
    });
  });
  EXPECT_EQ(c.kind, ErrorKind::kUsage) << c.message;
  if (pg->rank() != 1) {
    EXPECT_THAT(c.message, HasSubstr("aborted because rank 1 failed: --resume: no checkpoint in 'ckpt'"));
  }
  EXPECT_LT(c.after.count(), 5000) << "long before the 20 s timeout";
}

// Our schedules (mpi_schedules_test.cpp) wait for their point-to-point messages the same way.
TEST_F(MpiFailures, ASkippedScheduleTimesOutOnTheOthers) {
  const auto pg = join(mpi_size(), Milliseconds(300));
  Tensor t = Tensor::full({10007}, 1.0f, pg->device());
  const AllreduceOptions ring{.algorithm = Algorithm::kRing};
  if (pg->rank() == 1) {
    std::this_thread::sleep_for(Milliseconds(800));  // arrives long past the others' timeout
    const Caught late = caught([&] { pg->all_reduce(t, ring)->wait(); });
    EXPECT_EQ(late.kind, ErrorKind::kTimeout) << late.message;
    EXPECT_THAT(late.message,
                HasSubstr("[Rank 1] mpi ALLREDUCE (SequenceNumber=0) failed: aborted because rank"));
    return;
  }
  const Caught c = caught([&] { pg->all_reduce(t, ring)->wait(); });
  EXPECT_EQ(c.kind, ErrorKind::kTimeout) << c.message;
  EXPECT_THAT(c.message,
              HasSubstr(fmt::format("[Rank {}] mpi ALLREDUCE (SequenceNumber=0) failed: ", pg->rank())));
  EXPECT_THAT(c.message, HasSubstr("Watchdog caught collective operation timeout: it ran for"));
}

TEST_F(MpiFailures, RanksOnDifferentAlgorithmsFailWithAMismatch) {
  // Rank 0 runs a ring, the last rank (of 3 or more) MPI's own, the others a tree: the messages of
  // different schedules never match (a tag per collective), and the fingerprints say why.
  const int n = mpi_size();
  const auto pg = join(n, Milliseconds(20000));
  const int r = pg->rank();
  const Algorithm mine =
      r == 0 ? Algorithm::kRing : (n >= 3 && r == n - 1 ? Algorithm::kAuto : Algorithm::kTree);
  Tensor t = Tensor::full({10007}, 1.0f, pg->device());
  const Caught c = caught([&] { pg->all_reduce(t, {.algorithm = mine})->wait(); });
  EXPECT_EQ(c.kind, ErrorKind::kMismatch) << c.message;
  // The ranks that saw a neighbour differ, or (4 ranks) were told by one.
  EXPECT_THAT(c.message, HasSubstr("Detected mismatch between collectives on ranks"));
  EXPECT_THAT(c.message,
              HasSubstr("OpType=ALLREDUCE, TensorShape=[10007], TensorDtypes=float32, ReduceOp=sum, "
                        "Algorithm="));
}

TEST_F(MpiFailures, ARankThatReturnedFailsThePeersWaitingForIt) {
  const auto pg = join(mpi_size(), Milliseconds(20000));
  pg->barrier()->wait();
  if (pg->rank() == 1) {
    pg->backend().rank_finished();
    return;
  }
  const Caught c = caught([&] { pg->barrier()->wait(); });
  EXPECT_EQ(c.kind, ErrorKind::kMismatch);
  EXPECT_THAT(c.message,
              HasSubstr(fmt::format("[Rank {}] mpi BARRIER (SequenceNumber=1) failed: ", pg->rank())));
  EXPECT_THAT(c.message,
              HasSubstr("rank 1 returned from its function after 1 collectives without joining it"));
  EXPECT_LT(c.after.count(), 5000);
}

TEST_F(MpiFailures, AWrongRankNeverArrivingFailsInitWithinItsTimeout) {
  // Only rank 0 joins a world of 2: it names rank 1 as missing after the timeout.
  if (test::mpi_rank() != 0) return;
  const Caught c = caught([] { join(2, Milliseconds(300)); });
  EXPECT_EQ(c.kind, ErrorKind::kTimeout);
  EXPECT_EQ(
      c.message,
      "init_process_group(\"mpi\"): rank 0 waited 300 ms for ranks that never arrived: [1] of a world of 2");
  EXPECT_LT(c.after.count(), 5000);
}

// A rank's process dies in the middle of a collective: mpirun stops the job and names it (ctest
// checks mpirun's report); the surviving rank is killed by mpirun, never left hanging.
TEST(MpiKill, DISABLED_AKilledRankStopsTheJob) {
  DPS_REQUIRE_MPIRUN();
  const auto pg = join(mpi_size(), Milliseconds(60000));
  pg->barrier()->wait();
  if (pg->rank() == 1) _exit(3);
  Tensor t = Tensor::full({8}, 1.0f, pg->device());
  pg->all_reduce(t)->wait();
}

// Outside mpirun (plain ctest): asking for the backend is one clear line.
TEST(MpiOutsideMpirun, InitSaysHowToStartTheProgram) {
  if (test::under_mpirun()) GTEST_SKIP() << "run by ctest mpi_outside_mpirun, without mpirun";
  EXPECT_TRUE(mpi::built());
  EXPECT_TRUE(is_backend_registered("mpi"));
  const Caught c = caught([] { init_process_group({.backend = "mpi", .rank = 0, .world_size = 1}); });
  EXPECT_EQ(c.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(c.message,
            "init_process_group(\"mpi\"): this process was not started by mpirun (OMPI_COMM_WORLD_RANK is "
            "not set): "
            "run it as `mpirun -np N PROGRAM` (as root add --allow-run-as-root, with more ranks than cores "
            "--oversubscribe)");
}

}  // namespace
}  // namespace dpscope
