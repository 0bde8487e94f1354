// A directory of process ranks' rank-K.jsonl files in the viewer's model (Document, ReplayModel,
// Playback): opened at once, its ranks are one timeline (devices per rank, a transfer between two
// processes drawn between their cards); followed live while several rank files grow step by step,
// the playhead stays at the latest time every rank has written, so what a faster rank wrote past
// the slowest one's last event is not shown yet; a rank file that appears later is waited for.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "replay/document.hpp"
#include "replay/playback.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using testing::scratch_dir;
using testing::write_text;

// Rank `rank` of `world_size` processes: one cpu device, its clock `offset_ns` behind rank 0's.
std::string rank_header(int rank, int world_size, int64_t offset_ns) {
  TraceHeader h;
  h.clock = "measured";
  h.run_json = fmt::format(
      R"({{"mode":"ddp","device":"cpu","backend":"mpi","devices":{},"process":{{"rank":{},"world_size":{},"clock_offset_ns":{},"clock_uncertainty_ns":5}}}})",
      world_size, rank, world_size, offset_ns);
  h.devices.push_back({.id = 0, .name = "cpu", .kind = "cpu"});
  fmt::memory_buffer out;
  append_trace_header(out, h);
  return fmt::to_string(out);
}

// A 10 ns compute span of `rank` in step `step` ('\n' included).
std::string span(int rank, int64_t ts, int step = 0) {
  return fmt::format(
      R"({{"type":"span","ts":{},"rank":{},"dev":0,"step":{},"phase":"forward","name":"k{}@{}","cat":"compute","stream":"compute","dur":10}})"
      "\n",
      ts, rank, step, rank, ts);
}

void append_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

std::filesystem::path rank_path(const std::filesystem::path& dir, int rank) {
  return dir / trace::rank_file_name(rank);
}

TEST(RankDirectory, OpensAsOneTimelineWithACardPerProcess) {
  const auto dir = scratch_dir();
  write_text(
      rank_path(dir, 0),
      rank_header(0, 2, 0) + span(0, 100) +
          R"({"type":"transfer","ts":200,"rank":0,"dev":0,"step":0,"phase":"backward","name":"send/recv","stream":"comm","dur":100,"src":0,"dst":0,"bytes":64,"flow":1,"dst_rank":1})"
          "\n");
  write_text(rank_path(dir, 1), rank_header(1, 2, 50) + span(1, 100));
  const auto doc = Document::open(dir, {.strict = true});
  ASSERT_EQ(doc->error(), "");
  EXPECT_TRUE(doc->warnings().empty());
  EXPECT_EQ(doc->display_name(), dir.filename().string());
  const ReplayModel& m = *doc->model();
  ASSERT_EQ(m.devices().size(), 2u);
  EXPECT_EQ(m.devices()[0].name, "cpu:0");
  EXPECT_EQ(m.devices()[1].name, "cpu:1");
  EXPECT_EQ(m.devices()[1].rank, 1);
  EXPECT_EQ(m.event_count(), 3u);
  EXPECT_EQ(m.ts_at(1), 150) << "rank 1's span on rank 0's clock";
  const ReplayState s = m.state_at(m.at_time(250));
  ASSERT_EQ(s.transfers.size(), 1u) << "the send from process 0 to process 1, in flight";
  EXPECT_EQ(s.transfers[0].src, 0);
  EXPECT_EQ(s.transfers[0].dst, 1);
}

TEST(RankDirectory, AnUnreadableDirectoryIsOneLineNamingIt) {
  const auto dir = scratch_dir();
  const auto doc = Document::open(dir, {.strict = true});
  EXPECT_EQ(doc->model(), nullptr);
  EXPECT_EQ(doc->error(), fmt::format("'{}' has no rank-K.jsonl files (the per-rank traces of mpirun -np N "
                                      "dpscope train --backend mpi --trace DIR)",
                                      dir.string()));
}

// Three processes append to their rank files in steps while the viewer follows the directory. After
// each step: the events the model holds, where the live playhead is (the latest time every rank
// has written, on rank 0's clock), and which events it shows (applied) and which not yet.
TEST(RankDirectory, FollowedLiveThePlayheadWaitsForTheSlowestRank) {
  const auto dir = scratch_dir() / "run";
  const auto doc = Document::open(dir / "", {.follow = true});  // before the run made its directory
  EXPECT_EQ(doc->error(), "");
  EXPECT_EQ(doc->model(), nullptr);
  auto t = std::chrono::steady_clock::now();
  Playback playback;
  auto poll = [&] {
    t += std::chrono::seconds(1);  // past the document's throttle
    const bool changed = doc->poll(t);
    if (changed && doc->model() != nullptr) playback.attach(*doc->model(), true);
    return changed;
  };
  // The names of the events the playhead shows, in time order.
  auto shown = [&] {
    std::vector<std::string> names;
    const ReplayModel& m = *doc->model();
    for (size_t p = 0; p < m.event_count(); ++p)
      if (m.applied(m.event_at(p), playback.cursor()))
        names.push_back(std::string(m.data().str(m.event(m.event_at(p)).name)));
    return names;
  };
  using Names = std::vector<std::string>;

  std::filesystem::create_directories(dir);
  write_text(rank_path(dir, 0), rank_header(0, 3, 0) + span(0, 100));
  write_text(rank_path(dir, 1), rank_header(1, 3, 1000) + span(1, 0));
  EXPECT_FALSE(poll());
  EXPECT_EQ(doc->model(), nullptr) << "rank 2 has not started";
  EXPECT_EQ(doc->live_status(), "waiting for rank-2.jsonl (2 of 3 ranks have written their header)");

  // Step 1: rank 2 (its clock 500 ns ahead: offset -500) appears with its header only.
  write_text(rank_path(dir, 2), rank_header(2, 3, -500));
  EXPECT_TRUE(poll());
  ASSERT_NE(doc->model(), nullptr);
  EXPECT_EQ(doc->model()->event_count(), 2u);
  EXPECT_EQ(doc->live_status(), "live: 2 events from 3 ranks");
  EXPECT_TRUE(playback.at_live_edge());
  EXPECT_EQ(playback.cursor(), doc->model()->start()) << "rank 2 has written nothing: nothing is final";
  EXPECT_EQ(shown(), Names{});

  // Step 2: rank 2 reaches 700 on its clock (200 on rank 0's): the edge is rank 0's 100.
  append_text(rank_path(dir, 2), span(2, 700));
  EXPECT_TRUE(poll());
  EXPECT_EQ(playback.cursor(), doc->model()->at_time(100));
  EXPECT_EQ(shown(), (Names{"k0@100"}));

  // Step 3: rank 0 runs ahead to 1500; rank 2 (at 200) is now the slowest.
  append_text(rank_path(dir, 0), span(0, 900) + span(0, 1500, 1));
  EXPECT_TRUE(poll());
  EXPECT_EQ(doc->model()->event_count(), 5u);
  EXPECT_EQ(playback.cursor(), doc->model()->at_time(200));
  EXPECT_EQ(shown(), (Names{"k0@100", "k2@700"})) << "rank 0's 900 and 1500 wait for rank 2";

  // Step 4: rank 2 reaches 1800 (1300): rank 1 (at 1000) holds the edge.
  append_text(rank_path(dir, 2), span(2, 1800, 1));
  EXPECT_TRUE(poll());
  EXPECT_EQ(playback.cursor(), doc->model()->at_time(1000));
  EXPECT_EQ(shown(), (Names{"k0@100", "k2@700", "k0@900", "k1@0"}));

  // Step 5: rank 1 reaches 600 (1600): rank 2's 1300 is the edge; rank 0's 1500 is still held.
  append_text(rank_path(dir, 1), span(1, 600, 1));
  EXPECT_TRUE(poll());
  EXPECT_EQ(playback.cursor(), doc->model()->at_time(1300));
  EXPECT_EQ(shown(), (Names{"k0@100", "k2@700", "k0@900", "k1@0", "k2@1800"}));
  EXPECT_FALSE(playback.cursor() == doc->model()->end());

  // Nothing new: no rebuild, the same picture.
  EXPECT_FALSE(poll());
  EXPECT_EQ(doc->warnings().size(), 0u);
}

TEST(RankDirectory, AFollowedDirectoryWithARankFileOfAnotherRunIsAnError) {
  const auto dir = scratch_dir();
  write_text(rank_path(dir, 0), rank_header(0, 2, 0));
  write_text(rank_path(dir, 1), rank_header(1, 3, 0));
  const auto doc = Document::open(dir, {.follow = true});
  EXPECT_EQ(doc->model(), nullptr);
  EXPECT_EQ(doc->error(),
            fmt::format("{}: its header says world_size 3, but {} says 2: the rank files are not "
                        "of one run",
                        rank_path(dir, 1).string(), rank_path(dir, 0).string()));
}

}  // namespace
}  // namespace dpscope::viz
