// The replay model on traces written by the runtime's collectives called directly (sim
// ProcessGroup on rank threads, ring all-reduce traced chunk by chunk, values before and after),
// without DDP around them: a tensor that is no model parameter, AVG, calls that stay apart.
#include <gtest/gtest.h>

#include "dpscope/comm/spawn.hpp"
#include "dpscope/core/tensor.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "replay/replay_model.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

constexpr int kRanks = 4;

// Two AVG all-reduces of 4096 floats (16 KiB) per rank in step 0, ring, not pipelined.
trace::TraceData write_and_read(const std::filesystem::path& path, bool trace_values) {
  const HardwarePreset hw = find_preset("h100-sxm");
  SimWorldOptions options;
  options.hardware = hw;
  TraceHeader header;
  for (int r = 0; r < kRanks; ++r) options.devices.push_back(Device::sim(r, hw));
  for (const Device& d : options.devices) add_trace_device(header, d);
  auto recorder = TraceRecorder::open(path, header, options.devices);
  auto world = SimWorld::create(kRanks, std::move(options));
  spawn(world, [trace_values](ProcessGroup& pg) {
    pg.device().set_step(0);
    pg.device().set_phase(Phase::kBackward);
    for (int call = 0; call < 2; ++call) {
      std::vector<float> v(4096);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>(pg.rank() * 10 + call + static_cast<int>(i % 5));
      Tensor t = Tensor::from_floats(v, {4096}, pg.device());
      pg.all_reduce(
            t,
            {.op = ReduceOp::kAvg, .algorithm = Algorithm::kRing, .slices = 1, .trace_values = trace_values})
          ->wait();
    }
  });
  recorder->close();
  return trace::read_trace(path, {.strict = false});
}

TEST(RuntimeTrace, RingAllReduceValuesAreAveragedPerCall) {
  const trace::TraceData data = write_and_read(testing::scratch_dir() / "allreduce.jsonl", true);
  // The sim backend records a tensor that is no model parameter as param -1 (docs/trace-format.md).
  ASSERT_TRUE(data.problems.empty()) << data.problems.front().reason;
  const ReplayModel m(data);
  ASSERT_EQ(m.reductions().size(), 2u) << "two calls of one unnamed tensor in one step stay apart";
  for (size_t call = 0; call < 2; ++call) {
    const Reduction& r = m.reductions()[call];
    ASSERT_EQ(r.before.size(), static_cast<size_t>(kRanks));
    ASSERT_EQ(r.after.size(), static_cast<size_t>(kRanks));
    for (int rank = 0; rank < kRanks; ++rank) {
      const auto& before = data.values[data.events[r.before[rank]].payload].values;
      // Element i of rank r held r * 10 + call + i % 5.
      for (size_t i = 0; i < before.size(); ++i)
        EXPECT_FLOAT_EQ(before[i], static_cast<float>(rank * 10 + call + i % 5));
      const auto& after = data.values[data.events[r.after[rank]].payload].values;
      // Mean over ranks of r * 10 + call + i % 5 = 15 + call + i % 5.
      for (size_t i = 0; i < after.size(); ++i)
        EXPECT_FLOAT_EQ(after[i], static_cast<float>(15 + call + i % 5));
    }
  }
  EXPECT_LT(m.reductions()[0].first_pos, m.reductions()[1].first_pos);
}

TEST(RuntimeTrace, RingStepsAreShownAsStepOfSteps) {
  const trace::TraceData data = write_and_read(testing::scratch_dir() / "allreduce.jsonl", false);
  ASSERT_TRUE(data.problems.empty()) << data.problems.front().reason;
  const ReplayModel m(data);
  // 2(n - 1) = 6 algorithm steps per all-reduce.
  EXPECT_EQ(m.algo_step_range(0), (std::pair<int32_t, int32_t>{0, 5}));
  EXPECT_EQ(m.algo_step_range(1), (std::pair<int32_t, int32_t>{0, 5}));
  size_t transfers = 0;
  for (const trace::Event& e : data.events) transfers += e.type == trace::EventType::kTransfer;
  EXPECT_EQ(transfers, 2u * 6 * kRanks);
  // Halfway through an all-gather step every rank sends one chunk to its right neighbour.
  const uint32_t pos = testing::find_position(m, [&](const trace::Event& e) {
    const trace::Transfer& t = m.data().transfer(e);
    return e.type == trace::EventType::kTransfer && t.coll == 0 && t.algo_step == 4 && e.rank == 2;
  });
  const trace::Event& t = m.event(m.event_at(pos));
  const ReplayState s = m.state_at(m.at_time(t.ts_ns + t.dur_ns / 2));
  ASSERT_EQ(s.transfers.size(), static_cast<size_t>(kRanks));
  for (const TransferSnapshot& x : s.transfers) {
    const int src_rank = m.devices()[x.src].rank;
    const int dst_rank = m.devices()[x.dst].rank;
    EXPECT_EQ(dst_rank, (src_rank + 1) % kRanks);
    EXPECT_EQ(x.bytes, 4096u);  // 16 KiB / 4 ranks
    EXPECT_NEAR(x.progress, 0.5, 0.01);
  }
  EXPECT_EQ(s.links.size(), static_cast<size_t>(kRanks));
  const DeviceSnapshot& d = s.devices[m.device_index(t.dev)];
  const auto comm = std::find_if(d.activity.begin(), d.activity.end(),
                                 [](const StreamActivity& a) { return a.stream == StreamKind::kComm; });
  ASSERT_NE(comm, d.activity.end());
  EXPECT_EQ(comm->text, "all_reduce ring 16.00 KiB step 5/6");
}

}  // namespace
}  // namespace dpscope::viz
