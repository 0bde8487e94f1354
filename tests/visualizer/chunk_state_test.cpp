// The chunk view (visualizer/replay/chunk_state.cpp) on collectives the runtime traced: a ring
// all-reduce's reduce-scatter leaves each GPU one complete chunk and its all-gather every chunk
// everywhere; a tree all-reduce and a ring all-gather replay the same way; an average's division
// by N shows once its "avg scale" has run.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <set>

#include "dpscope/trace_tools/reader.hpp"
#include "dpscope_bench/collective_bench.hpp"
#include "replay/replay_model.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using Loaded = testing::LoadedTrace;
using testing::load_trace;

// One traced collective of 1 MiB on 4 simulated T4s.
Loaded bench_trace(const std::string& name, OpType collective, Algorithm algorithm,
                   ReduceOp op = ReduceOp::kSum) {
  BenchOptions o;
  o.op = op;
  o.devices = 4;
  o.preset = "t4";
  o.collective = collective;
  o.algorithm = algorithm;
  o.min_bytes = o.max_bytes = 1 << 20;
  o.timing_only = true;
  o.iterations = 1;
  o.warmup = 0;
  o.trace = testing::scratch_dir() / name;
  run_collective_bench(o);
  return load_trace(o.trace);
}

// The latest arrival of the collective's transfers whose name contains `word`.
int64_t last_arrival(const ReplayModel& m, const Collective& c, std::string_view word) {
  int64_t t = -1;
  for (uint32_t e : c.transfers)
    if (m.data().str(m.event(e).name).find(word) != std::string_view::npos)
      t = std::max(t, m.event(e).end_ns());
  return t;
}

TEST(ChunkView, ARingAllReduceLeavesOneCompleteChunkPerGpuAfterReduceScatterThenAllChunksEverywhere) {
  const Loaded l = bench_trace("ring_all_reduce.jsonl", OpType::kAllReduce, Algorithm::kRing);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.collectives().empty());
  const Collective& c = m.collectives().front();
  ASSERT_EQ(c.members.size(), 4u);
  ASSERT_EQ(c.data_chunks(), 4);

  // As the first step's transfers leave, every GPU holds only its own contribution, in every chunk.
  const ReplayState first = m.state_at(m.at_time(m.event(c.transfers.front()).ts_ns));
  for (size_t i = 0; i < c.members.size(); ++i) {
    const ChunkSnapshot& k = first.devices[static_cast<size_t>(c.members[i])].chunks;
    ASSERT_EQ(k.coll, c.id);
    ASSERT_EQ(k.held.size(), 4u);
    for (uint64_t h : k.held) EXPECT_EQ(h, uint64_t{1} << i);
    EXPECT_EQ(k.stage.rfind("reduce-scatter step 1/", 0), 0u) << k.stage;
  }

  // Reduce-scatter done: each GPU holds exactly one complete chunk, a different one on each.
  const ReplayState scattered = m.state_at(m.at_time(last_arrival(m, c, "reduce-scatter")));
  std::set<size_t> complete_chunks;
  for (int32_t d : c.members) {
    const ChunkSnapshot& k = scattered.devices[static_cast<size_t>(d)].chunks;
    size_t full = 0;
    for (size_t ch = 0; ch < k.held.size(); ++ch) {
      if (std::popcount(k.held[ch]) == 4) {
        ++full;
        complete_chunks.insert(ch);
      } else {
        EXPECT_GE(std::popcount(k.held[ch]), 1);  // partial sums, its own contribution included
      }
    }
    EXPECT_EQ(full, 1u) << m.devices()[static_cast<size_t>(d)].name;
    EXPECT_FALSE(k.complete());
  }
  EXPECT_EQ(complete_chunks.size(), 4u);

  // All-gather done: every chunk complete on every GPU.
  const ReplayState done = m.state_at(m.at_time(c.end_ns));
  for (int32_t d : c.members) {
    const ChunkSnapshot& k = done.devices[static_cast<size_t>(d)].chunks;
    EXPECT_TRUE(k.complete());
    EXPECT_EQ(k.stage, "all-reduce complete");
  }
}

TEST(ChunkView, ATreeAllReduceEndsWithEveryContributionEverywhere) {
  const Loaded l = bench_trace("tree_all_reduce.jsonl", OpType::kAllReduce, Algorithm::kTree);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.collectives().empty());
  const Collective& c = m.collectives().front();
  // Once the reduce has reached the roots (two trees, each with half the buffer), a root holds its
  // half with every contribution.
  const ReplayState mid = m.state_at(m.at_time(last_arrival(m, c, "reduce")));
  int complete_halves = 0;
  for (int32_t d : c.members)
    for (uint64_t h : mid.devices[static_cast<size_t>(d)].chunks.held)
      complete_halves += std::popcount(h) == 4;
  EXPECT_GE(complete_halves, 1);
  const ReplayState done = m.state_at(m.at_time(c.end_ns));
  for (int32_t d : c.members) EXPECT_TRUE(done.devices[static_cast<size_t>(d)].chunks.complete());
}

TEST(ChunkView, ARingAllGatherCopiesEachOwnersChunkToEveryGpu) {
  const Loaded l = bench_trace("ring_all_gather.jsonl", OpType::kAllGather, Algorithm::kRing);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.collectives().empty());
  const Collective& c = m.collectives().front();
  const ReplayState first = m.state_at(m.after_event(m.position_of(c.transfers.front())));
  for (int32_t d : c.members) {
    const ChunkSnapshot& k = first.devices[static_cast<size_t>(d)].chunks;
    EXPECT_FALSE(k.reduction);
    EXPECT_FALSE(k.exchange);
    // Only its own block, before anything arrived.
    EXPECT_EQ(std::count_if(k.held.begin(), k.held.end(), [](uint64_t h) { return h != 0; }), 1);
  }
  const ReplayState done = m.state_at(m.at_time(c.end_ns));
  for (int32_t d : c.members) {
    const ChunkSnapshot& k = done.devices[static_cast<size_t>(d)].chunks;
    EXPECT_TRUE(k.complete());
    for (uint64_t h : k.held) EXPECT_EQ(std::popcount(h), 1);  // each block is one owner's
  }
}

// An all-to-all's chunk row is the GPU's receive buffer: block s is rank s's block for this GPU.
// Checked against the trace itself at every arrival: block s is there exactly when s is this GPU's
// own rank or rank s's transfer to it has arrived, and it holds rank s's data alone.
TEST(ChunkView, AnAllToAllFillsEachGpusBlockFromRankSWhenRankSsTransferArrives) {
  const Loaded l = bench_trace("pairwise_all_to_all.jsonl", OpType::kAllToAll, Algorithm::kDefault);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.collectives().empty());
  const Collective& c = m.collectives().front();
  ASSERT_EQ(c.members.size(), 4u);
  ASSERT_EQ(c.data_chunks(), 4);
  ASSERT_EQ(c.transfers.size(), 12u);  // n - 1 rounds of n transfers
  auto member = [&](int32_t device_id) {
    for (size_t i = 0; i < c.members.size(); ++i)
      if (m.devices()[static_cast<size_t>(c.members[i])].id == device_id) return static_cast<int>(i);
    return -1;
  };
  std::vector<int64_t> moments{m.event(c.transfers.front()).ts_ns};
  for (uint32_t e : c.transfers) moments.push_back(m.event(e).end_ns());
  std::sort(moments.begin(), moments.end());
  int partial = 0;
  for (int64_t t : moments) {
    const ReplayState s = m.state_at(m.at_time(t));
    for (size_t d = 0; d < c.members.size(); ++d) {
      std::vector<uint64_t> expected(c.members.size(), 0);
      expected[d] = uint64_t{1} << d;
      for (uint32_t e : c.transfers) {
        const trace::Transfer& tr = m.data().transfer(m.event(e));
        const int src = member(tr.src);
        ASSERT_GE(src, 0);
        if (member(tr.dst) == static_cast<int>(d) && m.event(e).end_ns() <= t)
          expected[static_cast<size_t>(src)] = uint64_t{1} << src;
      }
      const ChunkSnapshot& k = s.devices[static_cast<size_t>(c.members[d])].chunks;
      ASSERT_EQ(k.coll, c.id) << "t=" << t;
      EXPECT_FALSE(k.reduction);
      EXPECT_TRUE(k.exchange);
      EXPECT_EQ(k.held, expected) << "GPU of rank " << d << " at t=" << t << " ns";
      partial += std::count(expected.begin(), expected.end(), 0) != 0;
    }
  }
  EXPECT_GT(partial, 0);  // the moments in between were checked, not only the start and the end
  const ReplayState done = m.state_at(m.at_time(c.end_ns));
  for (int32_t d : c.members) EXPECT_TRUE(done.devices[static_cast<size_t>(d)].chunks.complete());
}

TEST(ChunkView, AnAverageShowsTheDivisionByTheNumberOfRanksOnceItRan) {
  const Loaded l = bench_trace("ring_avg.jsonl", OpType::kAllReduce, Algorithm::kRing, ReduceOp::kAvg);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.collectives().empty());
  const Collective& c = m.collectives().front();
  ASSERT_EQ(c.avg_scales.size(), 4u);
  const auto [device, event] = c.avg_scales.front();
  const ReplayState before = m.state_at(m.at_time(m.event(event).ts_ns));
  EXPECT_FALSE(before.devices[static_cast<size_t>(device)].chunks.averaged);
  const ReplayState after = m.state_at(m.at_time(m.event(event).end_ns()));
  const ChunkSnapshot& k = after.devices[static_cast<size_t>(device)].chunks;
  EXPECT_EQ(k.coll, c.id);
  EXPECT_TRUE(k.complete());
  EXPECT_TRUE(k.averaged);
  EXPECT_EQ(k.divisor, 4);
}

TEST(ChunkView, NoChunksBeforeAnyCollectiveOrAfterTheDeviceMovedOn) {
  const std::filesystem::path path = testing::scratch_dir() / "ddp_chunks_none.jsonl";
  testing::write_ddp_trace(path, 2, 2, 4);
  const Loaded l = load_trace(path);
  const ReplayModel& m = *l.model;
  for (const DeviceSnapshot& d : m.state_at(m.start()).devices) EXPECT_EQ(d.chunks.coll, -1);
  // The optimizer phase of the last step: its gradients' collectives are over and out of view.
  const ReplayState end = m.state_at(m.end());
  for (const DeviceSnapshot& d : end.devices) {
    if (d.phase == Phase::kOptimizer) {
      EXPECT_EQ(d.chunks.coll, -1);
    }
  }
}

}  // namespace
}  // namespace dpscope::viz
