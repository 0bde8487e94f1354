// Misuse never hangs: fingerprint mismatches fail on every rank naming both fingerprints, a rank
// that stops calling makes the others fail after the timeout (watchdog message), a failing or
// returning rank releases its peers at once, and bad arguments are clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include "comm_test_util.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

using test::round_options;
using ::testing::HasSubstr;

struct Outcome {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;  // empty: no error
};

// Runs fn on n ranks; each rank's Work error (or thrown error) lands in its slot.
std::vector<Outcome> outcomes(int n, Milliseconds timeout,
                              const std::function<std::shared_ptr<Work>(ProcessGroup&)>& fn) {
  std::vector<Outcome> out(n);
  spawn(
      n,
      [&](ProcessGroup& pg) {
        try {
          if (std::shared_ptr<Work> w = fn(pg)) w->wait();
        } catch (const Error& e) {
          out[pg.rank()] = {e.kind(), e.what()};
        }
      },
      round_options(timeout));
  return out;
}

// The error spawn() raises, as (kind, message).
Outcome spawn_error(int n, const RankFunction& fn, Milliseconds timeout = Milliseconds(20000)) {
  try {
    spawn(n, fn, round_options(timeout));
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {};
}

TEST(Mismatch, DifferentOpsFailOnEveryRankNamingBothFingerprints) {
  const auto out = outcomes(2, Milliseconds(20000), [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({4}, pg.device());
    return pg.rank() == 0 ? pg.all_reduce(t) : pg.broadcast(t);
  });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, ErrorKind::kMismatch);
    EXPECT_EQ(
        o.message,
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=float32, "
        "ReduceOp=sum, Algorithm=auto), but Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=BROADCAST, TensorShape=[4], TensorDtypes=float32, "
        "Root=0, Algorithm=auto) (ranks that differ from rank 0: [1])");
  }
}

TEST(Mismatch, DifferentShapesRootsDtypesOpsAndModesAreDetected) {
  struct Case {
    const char* name;
    std::function<std::shared_ptr<Work>(ProcessGroup&)> call;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"shape",
       [](ProcessGroup& pg) {
         Tensor t = Tensor::zeros({pg.rank() == 2 ? 5 : 4}, pg.device());
         return pg.all_reduce(t);
       },
       "Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, "
       "TensorShape=[5]"},
      {"root",
       [](ProcessGroup& pg) {
         Tensor t = Tensor::zeros({4}, pg.device());
         return pg.broadcast(t, {.root = pg.rank() == 1 ? 1 : 0});
       },
       "Root=1"},
      {"dtype",
       [](ProcessGroup& pg) {
         Tensor t = Tensor::zeros({4}, pg.device(), MemoryCategory::kBuffers,
                                  pg.rank() == 1 ? DType::kI64 : DType::kF32);
         return pg.all_reduce(t);
       },
       "TensorDtypes=int64"},
      {"reduce op",
       [](ProcessGroup& pg) {
         Tensor t = Tensor::zeros({4}, pg.device());
         return pg.all_reduce(t, {.op = pg.rank() == 1 ? ReduceOp::kMax : ReduceOp::kSum});
       },
       "ReduceOp=max"},
      {"algorithm",
       [](ProcessGroup& pg) {
         Tensor t = Tensor::zeros({4}, pg.device());
         return pg.all_reduce(t, {.algorithm = pg.rank() == 1 ? Algorithm::kTree : Algorithm::kRing});
       },
       "Algorithm=tree"},
      {"timing-only",
       [](ProcessGroup& pg) {
         Tensor t = pg.rank() == 1 ? Tensor::meta({4}, pg.device()) : Tensor::zeros({4}, pg.device());
         return pg.all_reduce(t);
       },
       "TimingOnly=true"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (const Outcome& o : outcomes(3, Milliseconds(20000), c.call)) {
      EXPECT_EQ(o.kind, ErrorKind::kMismatch);
      EXPECT_THAT(o.message, HasSubstr(c.expected));
    }
  }
}

TEST(Mismatch, CollectivesCalledInADifferentOrderFailAtTheFirstDifference) {
  const auto out = outcomes(2, Milliseconds(20000), [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({4}, pg.device());
    if (pg.rank() == 0) {
      pg.all_reduce(t)->wait();
      return pg.barrier();
    }
    pg.barrier()->wait();
    return pg.all_reduce(t);
  });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, ErrorKind::kMismatch);
    EXPECT_THAT(o.message, HasSubstr("Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0, "
                                     "OpType=ALLREDUCE"));
    EXPECT_THAT(o.message, HasSubstr("Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0, "
                                     "OpType=BARRIER)"));
  }
}

TEST(Timeout, ARankThatStopsCallingMakesTheOthersFailAfterTheTimeout) {
  std::latch others_done(3);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> out(4);
  spawn(
      4,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {  // alive, but never joins
          others_done.wait();
          return;
        }
        Tensor t = Tensor::zeros({4}, pg.device());
        try {
          pg.all_reduce(t, {.timeout = Milliseconds(150)})->wait();
        } catch (const Error& e) {
          out[pg.rank()] = {e.kind(), e.what()};
        }
        others_done.count_down();
      },
      round_options());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(10));
  int watchdogs = 0;
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(out[r].kind, ErrorKind::kTimeout) << out[r].message;
    EXPECT_THAT(out[r].message,
                HasSubstr("Watchdog caught collective operation timeout: WorkSim(SequenceNumber=0, "
                          "OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=150) ran for "));
    EXPECT_THAT(out[r].message, HasSubstr("ranks that never joined: [1]"));
    watchdogs += out[r].message.rfind(fmt::format("[Rank {}] Watchdog", r), 0) == 0 ? 1 : 0;
  }
  EXPECT_GE(watchdogs, 1) << "the first rank to time out reports its own watchdog message";
}

TEST(Timeout, ALateRankFailsAtOnceOnceTheGroupTimedOut) {
  std::latch timed_out(1);
  std::vector<Outcome> out(2);
  spawn(
      2,
      [&](ProcessGroup& pg) {
        Tensor t = Tensor::zeros({4}, pg.device());
        if (pg.rank() == 1) timed_out.wait();
        try {
          pg.all_reduce(t, {.timeout = Milliseconds(pg.rank() == 0 ? 100 : 60000)})->wait();
        } catch (const Error& e) {
          out[pg.rank()] = {e.kind(), e.what()};
        }
        if (pg.rank() == 0) timed_out.count_down();
      },
      round_options());
  EXPECT_EQ(out[1].kind, ErrorKind::kTimeout);
  EXPECT_THAT(out[1].message, HasSubstr("[Rank 1] ALLREDUCE (SequenceNumber=0) aborted: [Rank 0] Watchdog"));
}

TEST(Abort, AThrowingRankReleasesPeersBlockedInACollective) {
  const auto start = std::chrono::steady_clock::now();
  const Outcome e = spawn_error(4, [](ProcessGroup& pg) {
    if (pg.rank() == 2) throw std::runtime_error("boom");
    Tensor t = Tensor::zeros({4}, pg.device());
    pg.all_reduce(t)->wait();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "peers must not wait 20 s";
  EXPECT_EQ(e.kind, ErrorKind::kInternal);
  EXPECT_EQ(e.message, "rank 2 failed: boom");
}

TEST(Abort, TheFailingRanksErrorKindIsKept) {
  const Outcome e = spawn_error(2, [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({4}, pg.device());
    if (pg.rank() == 1) throw Error(ErrorKind::kIo, "cannot read data.npy");
    pg.all_reduce(t)->wait();
  });
  EXPECT_EQ(e.kind, ErrorKind::kIo);
  EXPECT_EQ(e.message, "rank 1 failed: cannot read data.npy");
}

TEST(Abort, PeersSeeWhichRankFailed) {
  std::vector<Outcome> out(3);
  spawn_error(3, [&](ProcessGroup& pg) {
    if (pg.rank() == 0) throw std::runtime_error("out of patience");
    Tensor t = Tensor::zeros({4}, pg.device());
    try {
      pg.all_reduce(t)->wait();
    } catch (const Error& e) {
      out[pg.rank()] = {e.kind(), e.what()};
    }
  });
  for (int r : {1, 2})
    EXPECT_EQ(out[r].message,
              fmt::format("[Rank {}] ALLREDUCE (SequenceNumber=0) aborted because rank 0 failed: "
                          "out of patience",
                          r));
}

TEST(Abort, ARankThatReturnsEarlyReleasesItsPeers) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> out(3);
  spawn(
      3,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) return;
        Tensor t = Tensor::zeros({4}, pg.device());
        try {
          pg.all_reduce(t)->wait();
        } catch (const Error& e) {
          out[pg.rank()] = {e.kind(), e.what()};
        }
      },
      round_options());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].kind, ErrorKind::kMismatch);
    EXPECT_THAT(out[r].message,
                HasSubstr("can never complete: rank 1 returned from its function without joining it"));
  }
}

TEST(PointToPoint, ARecvWithoutASendTimesOut) {
  std::latch done(1);
  std::vector<Outcome> out(2);
  spawn(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 0) {
          done.wait();
          return;
        }
        Tensor t = Tensor::zeros({3}, pg.device());
        try {
          pg.recv(t, 0, {.tag = 7, .timeout = Milliseconds(100)})->wait();
        } catch (const Error& e) {
          out[1] = {e.kind(), e.what()};
        }
        done.count_down();
      },
      round_options());
  EXPECT_EQ(out[1].kind, ErrorKind::kTimeout);
  EXPECT_THAT(out[1].message, HasSubstr("[Rank 1] Watchdog caught collective operation timeout: "
                                        "WorkSim(SequenceNumber=0, OpType=RECV, NumelIn=0, NumelOut=3, "
                                        "Timeout(ms)=100) ran for "));
  EXPECT_THAT(out[1].message, HasSubstr("(waiting for rank 0, tag 7)"));
}

TEST(PointToPoint, SizeMismatchFailsBothSides) {
  const auto out = outcomes(2, Milliseconds(20000), [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({pg.rank() == 0 ? 8 : 4}, pg.device());
    return pg.rank() == 0 ? pg.send(t, 1) : pg.recv(t, 0);
  });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, ErrorKind::kMismatch);
    EXPECT_EQ(o.message,
              "[Rank 1] RECV (SequenceNumber=0) from rank 0 (tag 0) expected 4 float32 elements, but rank "
              "0 sent 8 float32 elements (SEND SequenceNumber=0)");
  }
}

// ---- invalid arguments: thrown by the call, before anything is sent ----

Outcome local_error(int n, const std::function<void(ProcessGroup&)>& call) {
  const Outcome e = spawn_error(n, call);
  return e;
}

TEST(InvalidArguments, RootOutOfRange) {
  const Outcome e = local_error(1, [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({4}, pg.device());
    pg.broadcast(t, {.root = 4});
  });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message,
            "rank 0 failed: broadcast: root 4 out of range for a group of 1 ranks (expected 0..0)");
}

TEST(InvalidArguments, WorldSizeZero) {
  try {
    SimWorld::create(0, round_options());
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(err.what(), "world size must be at least 1, got 0");
  }
  try {
    init_process_group("sim", 0, 0, {});
    FAIL();
  } catch (const Error& err) {
    EXPECT_STREQ(err.what(), "init_process_group: world size must be at least 1, got 0");
  }
}

TEST(InvalidArguments, TensorOnAnotherRanksDevice) {
  auto world = SimWorld::create(2, round_options());
  std::shared_ptr<ProcessGroup> pg = init_process_group("sim", 0, 2, {.world = world});
  Tensor elsewhere = Tensor::zeros({4}, world->device(1));
  try {
    pg->all_reduce(elsewhere);
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::kDevice);
    EXPECT_STREQ(err.what(), "all_reduce on rank 0: tensor is on sim:1, but this rank's device is sim:0");
  }
}

TEST(InvalidArguments, CountNotDivisibleByTheGroupSize) {
  const Outcome e = local_error(2, [](ProcessGroup& pg) {
    Tensor in = Tensor::zeros({5}, pg.device()), out = Tensor::zeros({2}, pg.device());
    pg.reduce_scatter_tensor(out, in);
  });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("reduce_scatter_tensor on rank "));
  EXPECT_THAT(e.message, HasSubstr(": input has 5 elements, not divisible by the group size 2"));
}

TEST(InvalidArguments, EmptyOrMisplacedTensorLists) {
  auto world = SimWorld::create(2, round_options());
  std::shared_ptr<ProcessGroup> pg = init_process_group("sim", 0, 2, {.world = world});
  Tensor t = Tensor::zeros({4}, pg->device());
  std::vector<Tensor> none;
  std::vector<Tensor> two = {Tensor::zeros({4}, pg->device()), Tensor::zeros({4}, pg->device())};
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::kInvalidArgument);
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { pg->all_gather(none, t); }),
            "all_gather on rank 0: expected 2 output tensors (one per rank), got 0");
  EXPECT_EQ(message([&] { pg->gather(t, none); }),
            "gather on root rank 0: expected 2 output tensors (one per rank), got 0");
  EXPECT_EQ(message([&] { pg->scatter(t, none); }),
            "scatter on root rank 0: expected 2 input tensors (one per rank), got 0");
  EXPECT_EQ(message([&] { pg->scatter(t, two, {.root = 1}); }),
            "scatter on rank 0: only the root (rank 1) passes inputs, got 2");
  EXPECT_EQ(message([&] { pg->reduce_scatter(t, none); }),
            "reduce_scatter on rank 0: expected 2 input tensors (one per rank), got 0");
  Tensor wrong = Tensor::zeros({3}, pg->device());
  EXPECT_EQ(message([&] { pg->all_gather_into_tensor(wrong, t); }),
            "all_gather_into_tensor on rank 0: output has 3 elements, expected 2 ranks x 4 = 8");
  EXPECT_EQ(message([&] { pg->send(t, 0); }), "send on rank 0: a rank cannot send to itself");
  EXPECT_EQ(message([&] { pg->recv(t, 5); }),
            "recv on rank 0: peer rank 5 out of range for a group of 2 ranks");
  EXPECT_EQ(message([&] { pg->new_group({1, 1}); }), "new_group: rank 1 listed twice");
  EXPECT_EQ(message([&] { pg->all_gather(two, t, {.algorithm = Algorithm::kTree}); }),
            "all_gather: algorithm 'tree' is not available (available: ring, auto)");
  Tensor ints = Tensor::zeros({4}, pg->device(), MemoryCategory::kBuffers, DType::kI64);
  EXPECT_EQ(message([&] { pg->all_reduce(ints, {.op = ReduceOp::kAvg}); }),
            "all_reduce: ReduceOp avg needs float32 tensors, got int64");
}

TEST(InvalidArguments, BackendsAndWorlds) {
  auto kind_and_message = [](const std::function<void()>& f) -> Outcome {
    try {
      f();
    } catch (const Error& err) {
      return {err.kind(), err.what()};
    }
    return {};
  };
  const Outcome mpi = kind_and_message([] { init_process_group("gloo", 0, 1, {}); });
  EXPECT_EQ(mpi.kind, ErrorKind::kUnsupported);
  // The exact message, with the registered names, is init_test.cpp's.
  EXPECT_THAT(mpi.message, HasSubstr("init_process_group: backend 'gloo' is not built in this version"));
  const Outcome bogus = kind_and_message([] { init_process_group("carrier-pigeon", 0, 1, {}); });
  EXPECT_EQ(bogus.kind, ErrorKind::kInvalidArgument);
  const Outcome no_world = kind_and_message([] { init_process_group("sim", 0, 1, {}); });
  EXPECT_EQ(no_world.message,
            "init_process_group(\"sim\"): options.world is required (the SimWorld the ranks share)");
  const Outcome rank = kind_and_message([] { init_process_group("sim", 3, 2, {}); });
  EXPECT_EQ(rank.message, "init_process_group: rank 3 out of range for a world of 2");
  SimWorldOptions twice = round_options();
  twice.devices = {Device::sim(0, *twice.hardware), Device::sim(0, *twice.hardware)};
  const Outcome dup = kind_and_message([&] { SimWorld::create(2, twice); });
  EXPECT_EQ(dup.message, "Duplicate GPU detected: ranks 0 and 1 are both on sim:0");
}

TEST(InvalidArguments, BadDpscopeAlgoEnvironment) {
  ::setenv("DPSCOPE_ALGO", "hypercube", 1);
  SimWorldOptions o = round_options();
  o.algorithm.reset();
  try {
    SimWorld::create(2, o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& err) {
    EXPECT_STREQ(err.what(),
                 "DPSCOPE_ALGO: unknown algorithm 'hypercube' (expected ring, tree, naive or auto)");
  }
  ::setenv("DPSCOPE_ALGO", "naive", 1);
  EXPECT_EQ(SimWorld::create(2, o)->default_algorithm(), Algorithm::kNaive);
  ::unsetenv("DPSCOPE_ALGO");
}

}  // namespace
// A rank calling all_to_all_single while its peer calls all_reduce: both fail naming both
// fingerprints (all_to_all has no algorithm to choose, so none in its fingerprint).
TEST(Mismatch, AllToAllAgainstAllReduceFailsOnEveryRank) {
  const auto out = outcomes(2, Milliseconds(20000), [](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({4}, pg.device()), o = Tensor::zeros({4}, pg.device());
    return pg.rank() == 0 ? pg.all_to_all_single(o, t) : pg.all_reduce(t);
  });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, ErrorKind::kMismatch);
    EXPECT_EQ(
        o.message,
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLTOALL, TensorShape=[4], TensorDtypes=float32), "
        "but Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=float32, "
        "ReduceOp=sum, Algorithm=auto) (ranks that differ from rank 0: [1])");
  }
}

TEST(InvalidArguments, AllToAllSingleSplitsAndSizes) {
  auto check = [](const std::function<void(ProcessGroup&)>& fn, ErrorKind kind, const std::string& message) {
    const Outcome e = local_error(2, fn);  // either rank may be the first to fail
    EXPECT_EQ(e.kind, kind);
    EXPECT_THAT(e.message,
                ::testing::MatchesRegex("rank [01] failed: all_to_all(_single)? on rank [01]: .*"));
    EXPECT_THAT(e.message, HasSubstr(message));
  };
  check(
      [](ProcessGroup& pg) {
        Tensor in = Tensor::zeros({5}, pg.device()), out = Tensor::zeros({5}, pg.device());
        pg.all_to_all_single(out, in);
      },
      ErrorKind::kInvalidArgument,
      "Tensor's dim 0 does not divide equally across group size (input dim 0 is 5, group size 2)");
  check(
      [](ProcessGroup& pg) {
        Tensor in = Tensor::zeros({4}, pg.device()), out = Tensor::zeros({1, 4}, pg.device());
        pg.all_to_all_single(out, in);
      },
      ErrorKind::kInvalidArgument,
      "Tensor's dim 0 does not divide equally across group size (output dim 0 is 1, group size 2)");
  check(
      [](ProcessGroup& pg) {
        Tensor in = Tensor::zeros({4}, pg.device()), out = Tensor::zeros({6}, pg.device());
        pg.all_to_all_single(out, in);
      },
      ErrorKind::kInvalidArgument,
      "output has 6 elements but input has 4 (equal splits send and receive the same amount)");
  check(
      [](ProcessGroup& pg) {
        Tensor in = Tensor::zeros({4}, pg.device()),
               out = Tensor::zeros({4}, pg.device(), MemoryCategory::kActivations, DType::kI64);
        pg.all_to_all_single(out, in);
      },
      ErrorKind::kInvalidArgument, ": the output is int64, expected float32");
}

}  // namespace dpscope
