// The out-of-place forms of all_reduce, broadcast and reduce (ProcessGroup::all_reduce_into, ...:
// NCCL's sendbuff != recvbuff, nccl-tests' out-of-place column) and the in-place layouts of
// all_gather, reduce_scatter and alltoall (nccl-tests' in-place column) on the sim backend: the
// results are bit-identical to the other form's, the input is left intact, the simulated time is
// the same (one schedule), and a partial overlap of input and output is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "comm_test_util.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

using test::round_options;
using ::testing::HasSubstr;

// Rank r's element i: values whose sums depend on the order of the additions, so a schedule that
// combined them differently would show.
std::vector<float> inputs_of(int rank, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    v[static_cast<size_t>(i)] = 0.1f * static_cast<float>(rank + 1) + 1e-3f * i;
  return v;
}

SimWorldOptions options_for(Algorithm algorithm) {
  SimWorldOptions o = round_options();
  o.algorithm = algorithm;
  return o;
}

// What each rank ends with: its output, its input after the call, and the collective's end.
struct RankResult {
  std::vector<float> output;
  std::vector<float> input;
  int64_t end_ns = 0;
};

std::vector<RankResult> run_ranks(int n, Algorithm algorithm,
                                  const std::function<void(ProcessGroup&, RankResult&)>& fn) {
  std::vector<RankResult> results(n);
  spawn(
      n, [&](ProcessGroup& pg) { fn(pg, results[pg.rank()]); }, options_for(algorithm));
  return results;
}

struct Case {
  int ranks;
  int64_t count;
  Algorithm algorithm;
  int slices;
};

std::string name_of(const Case& c) {
  return fmt::format("{} ranks, {} elements, {}, {} slices", c.ranks, c.count, to_string(c.algorithm),
                     c.slices);
}

const std::vector<Case> kCases = {
    {1, 10, Algorithm::kRing, 0},   {2, 1, Algorithm::kRing, 0},   {3, 1000, Algorithm::kRing, 3},
    {5, 4099, Algorithm::kRing, 0}, {8, 333, Algorithm::kRing, 2}, {4, 1000, Algorithm::kTree, 0},
    {5, 777, Algorithm::kTree, 4},  {7, 10, Algorithm::kTree, 0},  {3, 100, Algorithm::kNaive, 0},
    {6, 64, Algorithm::kNaive, 0},  {1, 5, Algorithm::kTree, 0},   {2, 4096, Algorithm::kAuto, 0}};

TEST(AllReduceInto, EqualsTheInPlaceResultBitForBitAndLeavesTheInputIntact) {
  for (const Case& c : kCases) {
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      SCOPED_TRACE(name_of(c) + ", " + to_string(op));
      auto run = [&](bool out_of_place) {
        return run_ranks(c.ranks, c.algorithm, [&](ProcessGroup& pg, RankResult& r) {
          const std::vector<float> values = inputs_of(pg.rank(), c.count);
          Tensor input = Tensor::from_floats(values, {c.count}, pg.device());
          Tensor output = Tensor::full({c.count}, -7.0f, pg.device());
          const AllreduceOptions options{.op = op, .slices = c.slices};
          std::shared_ptr<Work> w =
              out_of_place ? pg.all_reduce_into(output, input, options) : pg.all_reduce(input, options);
          w->wait();
          r.output = (out_of_place ? output : input).to_vector();
          r.input = out_of_place ? input.to_vector() : values;
          r.end_ns = w->end_ns();
        });
      };
      const std::vector<RankResult> in_place = run(false);
      const std::vector<RankResult> out_of_place = run(true);
      for (int rank = 0; rank < c.ranks; ++rank) {
        EXPECT_EQ(out_of_place[rank].output, in_place[rank].output) << "rank " << rank;
        EXPECT_EQ(out_of_place[rank].input, inputs_of(rank, c.count))
            << "rank " << rank << "'s input changed";
        EXPECT_EQ(out_of_place[rank].end_ns, in_place[rank].end_ns) << "one schedule, one simulated time";
      }
    }
  }
}

TEST(BroadcastInto, EveryOutputIsTheRootsInputAndNoInputChanges) {
  for (const Case& c : kCases) {
    for (int root = 0; root < c.ranks; root += 2) {
      SCOPED_TRACE(name_of(c) + ", root " + std::to_string(root));
      const std::vector<RankResult> got =
          run_ranks(c.ranks, c.algorithm, [&](ProcessGroup& pg, RankResult& r) {
            Tensor input = Tensor::from_floats(inputs_of(pg.rank(), c.count), {c.count}, pg.device());
            Tensor output = Tensor::full({c.count}, -7.0f, pg.device());
            pg.broadcast_into(output, input, {.root = root, .slices = c.slices})->wait();
            r.output = output.to_vector();
            r.input = input.to_vector();
          });
      for (int rank = 0; rank < c.ranks; ++rank) {
        EXPECT_EQ(got[rank].output, inputs_of(root, c.count)) << "rank " << rank;
        EXPECT_EQ(got[rank].input, inputs_of(rank, c.count)) << "rank " << rank << "'s input changed";
      }
    }
  }
}

// The root's output is the in-place reduce's result; other ranks' outputs are not written (NCCL
// uses recvbuff on the root only) and no input changes.
TEST(ReduceInto, OnlyTheRootsOutputIsWrittenWithTheInPlaceResult) {
  for (const Case& c : kCases) {
    const int root = c.ranks - 1;
    SCOPED_TRACE(name_of(c));
    auto run = [&](bool out_of_place) {
      return run_ranks(c.ranks, c.algorithm, [&](ProcessGroup& pg, RankResult& r) {
        Tensor input = Tensor::from_floats(inputs_of(pg.rank(), c.count), {c.count}, pg.device());
        Tensor output = Tensor::full({c.count}, -7.0f, pg.device());
        const ReduceOptions options{.root = root, .op = ReduceOp::kSum, .slices = c.slices};
        std::shared_ptr<Work> w =
            out_of_place ? pg.reduce_into(output, input, options) : pg.reduce(input, options);
        w->wait();
        r.output = (out_of_place ? output : input).to_vector();
        r.input = input.to_vector();
        r.end_ns = w->end_ns();
      });
    };
    const std::vector<RankResult> in_place = run(false);
    const std::vector<RankResult> out_of_place = run(true);
    for (int rank = 0; rank < c.ranks; ++rank) {
      if (rank == root) {
        EXPECT_EQ(out_of_place[rank].output, in_place[rank].output);
      } else {
        EXPECT_EQ(out_of_place[rank].output, std::vector<float>(static_cast<size_t>(c.count), -7.0f))
            << "rank " << rank << "'s output was written";
      }
      EXPECT_EQ(out_of_place[rank].input, inputs_of(rank, c.count)) << "rank " << rank << "'s input changed";
      EXPECT_EQ(out_of_place[rank].end_ns, in_place[rank].end_ns);
    }
  }
}

// NCCL lets each rank choose: some ranks in place, others out of place, in one collective.
TEST(AllReduceInto, RanksMayMixInPlaceAndOutOfPlace) {
  const std::vector<RankResult> got = run_ranks(4, Algorithm::kRing, [&](ProcessGroup& pg, RankResult& r) {
    Tensor input = Tensor::from_floats(inputs_of(pg.rank(), 1000), {1000}, pg.device());
    if (pg.rank() % 2 == 0) {
      Tensor output = Tensor::zeros({1000}, pg.device());
      pg.all_reduce_into(output, input)->wait();
      r.output = output.to_vector();
    } else {
      pg.all_reduce(input)->wait();
      r.output = input.to_vector();
    }
  });
  const std::vector<RankResult> all_in_place =
      run_ranks(4, Algorithm::kRing, [&](ProcessGroup& pg, RankResult& r) {
        Tensor t = Tensor::from_floats(inputs_of(pg.rank(), 1000), {1000}, pg.device());
        pg.all_reduce(t)->wait();
        r.output = t.to_vector();
      });
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(got[rank].output, all_in_place[rank].output) << rank;
}

// Timing-only (meta tensors): no data, the same simulated time as in place.
TEST(AllReduceInto, TimingOnlyTakesTheInPlaceTime) {
  auto end = [&](bool out_of_place) {
    return run_ranks(4, Algorithm::kRing,
                     [&](ProcessGroup& pg, RankResult& r) {
                       Tensor input = Tensor::meta({1 << 20}, pg.device());
                       Tensor output = Tensor::meta({1 << 20}, pg.device());
                       std::shared_ptr<Work> w =
                           out_of_place ? pg.all_reduce_into(output, input) : pg.all_reduce(input);
                       w->wait();
                       r.end_ns = w->end_ns();
                     })
        .front()
        .end_ns;
  };
  EXPECT_GT(end(true), 0);
  EXPECT_EQ(end(true), end(false));
}

// nccl-tests' in-place layouts (src/common.cu startColl): all_gather's input is the rank's block of
// its output; reduce_scatter's output the rank's block of its input; alltoall's output its input.
TEST(InPlaceLayouts, GiveTheOutOfPlaceResults) {
  const int n = 3;
  const int64_t block = 101;
  auto run = [&](bool in_place) {
    return run_ranks(n, Algorithm::kAuto, [&](ProcessGroup& pg, RankResult& r) {
      const int rank = pg.rank();
      const std::vector<float> all = inputs_of(rank, block * n);
      // all_gather
      Tensor gathered = Tensor::zeros({block * n}, pg.device());
      Tensor mine = in_place ? gathered.rows(rank * block, block)
                             : Tensor::from_floats(inputs_of(rank, block), {block}, pg.device());
      if (in_place) mine.copy_from(Tensor::from_floats(inputs_of(rank, block), {block}, pg.device()));
      pg.all_gather_into_tensor(gathered, mine)->wait();
      r.output = gathered.to_vector();
      // reduce_scatter
      Tensor flat = Tensor::from_floats(all, {block * n}, pg.device());
      Tensor part = in_place ? flat.rows(rank * block, block) : Tensor::zeros({block}, pg.device());
      pg.reduce_scatter_tensor(part, flat)->wait();
      const std::vector<float> scattered = part.to_vector();
      r.output.insert(r.output.end(), scattered.begin(), scattered.end());
      // alltoall
      Tensor send = Tensor::from_floats(all, {block * n}, pg.device());
      Tensor recv = in_place ? send : Tensor::zeros({block * n}, pg.device());
      pg.all_to_all_single(recv, send)->wait();
      const std::vector<float> exchanged = recv.to_vector();
      r.output.insert(r.output.end(), exchanged.begin(), exchanged.end());
    });
  };
  const std::vector<RankResult> out_of_place = run(false);
  const std::vector<RankResult> in_place = run(true);
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_EQ(in_place[rank].output.size(), static_cast<size_t>(block * (2 * n + 1)));
    EXPECT_EQ(in_place[rank].output, out_of_place[rank].output) << "rank " << rank;
  }
}

TEST(OutOfPlaceErrors, APartialOverlapAndAnotherSizeAreRefused) {
  run_ranks(2, Algorithm::kRing, [&](ProcessGroup& pg, RankResult&) {
    Tensor buffer = Tensor::zeros({100}, pg.device());
    Tensor input = buffer.rows(0, 60);
    Tensor output = buffer.rows(40, 60);
    try {
      pg.all_reduce_into(output, input);
      ADD_FAILURE() << "a partial overlap was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("all_reduce_into on rank {}: output and input overlap in "
                                                  "part; pass one tensor (in place) or two that do not "
                                                  "overlap (out of place)",
                                                  pg.rank())));
    }
    Tensor small = Tensor::zeros({10}, pg.device());
    try {
      pg.broadcast_into(small, input);
      ADD_FAILURE() << "another size was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_THAT(e.what(),
                  HasSubstr(fmt::format("broadcast_into on rank {}: output has 10 elements, input 60; "
                                        "they must hold the same number",
                                        pg.rank())));
    }
    // One tensor for both: the in-place form.
    Tensor same = Tensor::full({8}, static_cast<float>(pg.rank() + 1), pg.device());
    pg.reduce_into(same, same, {.root = 0})->wait();
    if (pg.rank() == 0) {
      EXPECT_EQ(same.to_vector(), std::vector<float>(8, 3.0f));
    }
  });
}

// A backend that offers only the in-place forms (the default of Backend) says which form it lacks.
class InPlaceOnlyBackend final : public Backend {
 public:
  const char* name() const override { return "in-place-only"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return Milliseconds(1000); }
  void abort(ErrorKind, const std::string&) override {}
  void rank_finished() override {}

 private:
  Device device_ = Device::cpu();
};

TEST(OutOfPlaceErrors, ABackendWithoutTheFormSaysSoByName) {
  ProcessGroup pg(std::make_unique<InPlaceOnlyBackend>());
  Tensor input = Tensor::zeros({4});
  Tensor output = Tensor::zeros({4});
  const std::string expected =
      "backend 'in-place-only' does not support {} out of place (separate input and output tensors); pass "
      "one "
      "tensor for the in-place form";
  auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([&] { pg.all_reduce_into(output, input); }),
              HasSubstr(fmt::format(fmt::runtime(expected), "all_reduce")));
  EXPECT_THAT(message([&] { pg.broadcast_into(output, input); }),
              HasSubstr(fmt::format(fmt::runtime(expected), "broadcast")));
  EXPECT_THAT(message([&] { pg.reduce_into(output, input); }),
              HasSubstr(fmt::format(fmt::runtime(expected), "reduce")));
}

}  // namespace
}  // namespace dpscope
