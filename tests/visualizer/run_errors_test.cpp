// A failed run in the replay model (replay/run_errors.hpp): the `error` instants the runtime writes
// on every rank that stops, in time order, "happened" at a cursor only from their moment on, and
// the banner's text naming the first rank, its step, the ranks still running and the reason; the
// lone collective a rank waits in (replay_state.hpp StalledCollective) (lesson 13).
#include <gtest/gtest.h>

#include <algorithm>

#include "dpscope/base/error.hpp"
#include "dpscope/train/train.hpp"
#include "replay/run_errors.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

TEST(RunErrors, AMismatchedCollectiveRunEndsWithOneErrorPerRankInTimeOrder) {
  const std::filesystem::path trace = testing::scratch_dir() / "mismatch.jsonl";
  testing::write_failed_ddp_trace(trace, 3, "4-8-2", 8);

  const testing::LoadedTrace loaded = testing::load_trace(trace);
  const ReplayModel& model = *loaded.model;
  const RunErrors& errors = model.run_errors();
  ASSERT_EQ(errors.marks.size(), 3u);
  for (size_t i = 1; i < errors.marks.size(); ++i)
    EXPECT_LE(errors.marks[i - 1].ts_ns, errors.marks[i].ts_ns);
  const RunErrorMark& first = errors.marks.front();
  // A one-bucket model: the others' only all-reduce is launched at the end of backward, so every
  // rank learns of the mismatch at the same moment; ties are ordered by rank, whatever order the
  // rank threads wrote them in.
  EXPECT_EQ(first.rank, 0) << "rank 0 first, stopped in its lone all-reduce after step 1";
  EXPECT_EQ(first.step, 1);  // the trace's 0-based field; the headline counts from 1
  EXPECT_EQ(errors.marks.back().ts_ns, first.ts_ns);
  EXPECT_EQ(errors.marks[1].rank, 1);
  EXPECT_EQ(errors.marks[2].rank, 2);

  EXPECT_EQ(errors.happened(model.at_time(first.ts_ns - 1)), 0u);
  EXPECT_EQ(errors.first_happened(model.at_time(first.ts_ns - 1)), nullptr);
  EXPECT_EQ(errors.happened(model.at_time(first.ts_ns)), 3u);
  EXPECT_EQ(errors.first_happened(model.at_time(first.ts_ns)), &first);
  EXPECT_EQ(errors.happened(model.end()), 3u);
  EXPECT_EQ(errors.stopped_ranks(model.end()).size(), 3u);
  EXPECT_TRUE(errors.running_ranks(model.end()).empty());

  const RunErrorText text = run_error_text(first, errors.stopped_ranks(model.end()), {});
  EXPECT_TRUE(text.run_failed);
  EXPECT_EQ(text.headline, "Run failed: rank 0 stopped at step 2 (3 ranks stopped)");
  EXPECT_TRUE(text.reason.starts_with("Detected mismatch between collectives on ranks. Rank 0 is running"))
      << text.reason;
}

// Lesson 13 as the student sees it (chapters 4 to 6), on a model with two buckets: rank 0 waits
// in an all-reduce nobody else joins, while ranks 1-3 run step 3's forward and backward; once the
// last of them calls its first gradient all-reduce the mismatch is found and rank 0 stops; the
// others stop when DDP waits for that bucket at the end of their backward. Until then the banner
// says who stopped and who still runs; "Run failed" only once every rank has stopped.
TEST(RunErrors, RankZeroWaitsAloneThenStopsWhileTheOthersStillRun) {
  const std::filesystem::path trace = testing::scratch_dir() / "lone.jsonl";
  testing::write_failed_ddp_trace(trace, 4, "256-512-512-4", 16);
  const testing::LoadedTrace loaded = testing::load_trace(trace);
  const ReplayModel& model = *loaded.model;
  const trace::TraceData& data = model.data();
  auto device_of_rank = [&](int rank) {
    for (size_t d = 0; d < model.devices().size(); ++d)
      if (model.devices()[d].rank == rank && !model.devices()[d].is_host) return d;
    ADD_FAILURE() << "no device for rank " << rank;
    return size_t{0};
  };
  uint32_t lone = kNoEvent;
  for (uint32_t i = 0; i < data.events.size(); ++i)
    if (data.collective_error(data.events[i]) && data.events[i].rank == 0) lone = i;
  ASSERT_NE(lone, kNoEvent) << "rank 0's lone all-reduce is in the trace";
  const trace::Event& span = model.event(lone);

  // Halfway through rank 0's wait: its comm row names the ranks it waits for; nothing moves.
  const ReplayState waiting = model.state_at(model.at_time(span.ts_ns + span.dur_ns / 2));
  const DeviceSnapshot& gpu0 = waiting.devices[device_of_rank(0)];
  EXPECT_EQ(gpu0.stalled.event, lone);
  EXPECT_EQ(gpu0.stalled.op, "all_reduce");
  EXPECT_EQ(gpu0.stalled.waiting_for, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(gpu0.stalled.error.starts_with("Detected mismatch between collectives on ranks."))
      << gpu0.stalled.error;
  const auto comm = std::find_if(gpu0.activity.begin(), gpu0.activity.end(),
                                 [](const StreamActivity& a) { return a.stream == StreamKind::kComm; });
  ASSERT_NE(comm, gpu0.activity.end());
  EXPECT_EQ(comm->text, "all_reduce: waiting for ranks 1-3");
  EXPECT_TRUE(waiting.transfers.empty()) << "no chunk of it moves";
  for (int r = 1; r < 4; ++r) {
    const DeviceSnapshot& other = waiting.devices[device_of_rank(r)];
    EXPECT_EQ(other.step, 2) << "rank " << r << " runs the next step";
    EXPECT_EQ(other.stalled.event, kNoEvent) << "rank " << r;
  }
  EXPECT_EQ(model.run_errors().happened(model.at_time(span.ts_ns + span.dur_ns / 2)), 0u);

  // Between rank 0's error (the moment the last rank arrived) and the others'.
  const RunErrors& errors = model.run_errors();
  ASSERT_EQ(errors.marks.size(), 4u);
  const RunErrorMark& first = errors.marks.front();
  EXPECT_EQ(first.rank, 0);
  EXPECT_EQ(first.ts_ns, span.end_ns()) << "rank 0 stops when the mismatch is found";
  const int64_t last_ns = errors.marks.back().ts_ns;
  ASSERT_LT(first.ts_ns, last_ns) << "the others finish their backward first";
  const Cursor between = model.at_time((first.ts_ns + last_ns) / 2);
  EXPECT_EQ(errors.stopped_ranks(between), (std::vector<int32_t>{0}));
  EXPECT_EQ(errors.running_ranks(between), (std::vector<int32_t>{1, 2, 3}));
  const RunErrorText partial = run_error_text(*errors.first_happened(between), errors.stopped_ranks(between),
                                              errors.running_ranks(between));
  EXPECT_FALSE(partial.run_failed);
  EXPECT_EQ(partial.headline, "Rank 0 stopped at step 2 (ranks 1-3 still running)");
  EXPECT_TRUE(partial.reason.starts_with("Detected mismatch between collectives on ranks."))
      << partial.reason;
  const ReplayState after = model.state_at(between);
  EXPECT_EQ(after.devices[device_of_rank(0)].stalled.event, kNoEvent) << "its wait has ended";

  // Every rank has stopped: now the run has failed.
  const RunErrorText all =
      run_error_text(*errors.first_happened(model.end()), errors.stopped_ranks(model.end()),
                     errors.running_ranks(model.end()));
  EXPECT_TRUE(all.run_failed);
  EXPECT_EQ(all.headline, "Run failed: rank 0 stopped at step 2 (4 ranks stopped)");
}

TEST(RunErrors, RankListsReadAsRanges) {
  EXPECT_EQ(rank_list_label({}), "");
  EXPECT_EQ(rank_list_label({3}), "rank 3");
  EXPECT_EQ(rank_list_label({1, 2}), "ranks 1, 2");
  EXPECT_EQ(rank_list_label({1, 2, 3}), "ranks 1-3");
  EXPECT_EQ(rank_list_label({1, 3, 4}), "ranks 1, 3, 4");
  RunErrorMark mark{.rank = 0, .step = 1, .message = "boom"};
  EXPECT_EQ(run_error_text(mark, {0, 2}, {1, 3}).headline,
            "Ranks 0, 2 stopped at step 2 (ranks 1, 3 still running)");
  EXPECT_EQ(run_error_text(mark, {0}, {1}).headline, "Rank 0 stopped at step 2 (rank 1 still running)");
}

TEST(RunErrors, BannerTextDropsTheSpawnPrefixAndSaysWhenThereIsNoReason) {
  RunErrorMark mark{.rank = 2, .step = -1, .message = "rank 2 failed: out of memory"};
  EXPECT_EQ(run_error_text(mark, 1).headline, "Run failed: rank 2 stopped before training");
  EXPECT_EQ(run_error_text(mark, 1).reason, "out of memory");
  mark.message = "";
  EXPECT_EQ(run_error_text(mark, 1).reason, "(the trace gives no reason)");
}

TEST(RunErrors, ARunThatEndsNormallyHasNone) {
  const std::string text =
      R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{},"devices":[{"id":0,"name":"sim:0","kind":"sim","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0}],"links":[],"params":[],"buckets":[]})"
      "\n"
      R"({"type":"instant","ts":5,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad_ready","args":{"param":0}})"
      "\n";
  const trace::TraceData data = trace::parse_trace(text);
  const ReplayModel model(data);
  EXPECT_TRUE(model.run_errors().empty());
  EXPECT_EQ(model.run_errors().happened(model.end()), 0u);
}

}  // namespace
}  // namespace dpscope::viz
