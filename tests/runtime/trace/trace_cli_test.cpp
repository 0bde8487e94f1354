// `dpscope trace export --chrome IN OUT` and `dpscope trace stats IN`, run as the built binary:
// output, exit codes (0 ok, 2 for bad input) and one-line error messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using RunResult = dpscope::testing::CommandResult;
using dpscope::testing::run_dpscope;

RunResult run_cli(const std::string& args) { return run_dpscope(args); }

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

TEST(TraceCli, ExportWritesChromeJsonAndSaysWhereToOpenIt) {
  const auto dir = testing::scratch_dir();
  const auto in = testing::record_sample_trace(dir / "run.jsonl");
  const auto out = dir / "run.json";
  const size_t events = read_trace(in).events.size();
  const RunResult r = run_cli("trace export --chrome " + quoted(in) + " " + quoted(out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            fmt::format("wrote {} ({} trace events as Chrome Trace Event JSON)\n", out.string(), events) +
                "open it at https://ui.perfetto.dev\n");
  const nlohmann::json doc = nlohmann::json::parse(testing::read_file(out));
  EXPECT_FALSE(doc["traceEvents"].empty());
}

TEST(TraceCli, ExportNeedsAFormat) {
  const auto dir = testing::scratch_dir();
  const auto in = testing::record_sample_trace(dir / "run.jsonl");
  const RunResult r = run_cli("trace export " + quoted(in) + " " + quoted(dir / "out.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "dpscope: error: --chrome is required\n");
}

TEST(TraceCli, MissingInputIsOneLineAndExitCode2) {
  for (const std::string& cmd : {std::string("trace stats /nonexistent/run.jsonl"),
                                 std::string("trace export --chrome /nonexistent/run.jsonl /tmp/x.json")}) {
    const RunResult r = run_cli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_EQ(r.output, "dpscope: error: cannot read trace '/nonexistent/run.jsonl': no such file\n") << cmd;
  }
}

TEST(TraceCli, MalformedLineFailsUnlessLenient) {
  const auto dir = testing::scratch_dir();
  const auto in = dir / "bad.jsonl";
  testing::write_file(
      in,
      testing::header_line() +
          R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"forward","name":"k","cat":"compute","stream":"compute","dur":10})"
          "\n"
          R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"x"})"
          "\n");
  RunResult r = run_cli("trace stats " + quoted(in));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "dpscope: error: " + in.string() + ":3: unknown phase 'x'\n");

  r = run_cli("trace stats --lenient " + quoted(in));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dpscope: warning: skipped " + in.string() + ":3: unknown phase 'x'\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\nsim:0 "), std::string::npos) << r.output;
}

TEST(TraceCli, NewerFormatIsRefused) {
  const auto dir = testing::scratch_dir();
  const auto in = dir / "future.jsonl";
  testing::write_file(in, testing::header_line("2.0"));
  const RunResult r = run_cli("trace export --chrome " + quoted(in) + " " + quoted(dir / "out.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output,
            "dpscope: error: " + in.string() +
                ": trace format version 2.0 is newer than this dpscope supports (1.x); upgrade dpscope\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "out.json"));
}

TEST(TraceCli, StatsPrintsOneRowPerDevice) {
  const auto dir = testing::scratch_dir();
  const auto in = testing::record_sample_trace(dir / "run.jsonl");
  const size_t events = read_trace(in).events.size();
  const RunResult r = run_cli("trace stats --per-step " + quoted(in));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(
                fmt::format("{}: {} events, simulated clock, 2 devices\ndevice ", in.string(), events), 0),
            0u)
      << r.output;
  EXPECT_NE(r.output.find("\nsim:0 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n1 sim:0 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("host"), std::string::npos) << "the host has no events of its own";
}

// A directory of process ranks' files (mpirun ... --trace DIR) is read as their merge.
TEST(TraceCli, StatsAndExportReadADirectoryOfRankFiles) {
  const auto dir = testing::scratch_dir() / "run";
  std::filesystem::create_directories(dir);
  testing::write_file(dir / "rank-0.jsonl", testing::rank_header(0, 2, 0) + testing::rank_span(0, 1000, "a"));
  testing::write_file(dir / "rank-1.jsonl",
                      testing::rank_header(1, 2, -2500) + testing::rank_span(1, 3000, "b"));
  RunResult r = run_cli("trace stats " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(fmt::format("{}: 2 events, measured clock, 2 devices\n"
                                       "2 process ranks (rank-K.jsonl) on rank 0's clock:\n"
                                       "  rank 0: clock offset +0.0 us (+/- 0.0 us)\n"
                                       "  rank 1: clock offset -2.5 us (+/- 0.0 us)\n"
                                       "device ",
                                       dir.string()),
                           0),
            0u)
      << r.output;
  EXPECT_NE(r.output.find("\ncpu:0 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\ncpu:1 "), std::string::npos) << r.output;

  const auto out = dir.parent_path() / "run.json";
  r = run_cli("trace export --chrome " + quoted(dir) + " " + quoted(out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json doc = nlohmann::json::parse(testing::read_file(out));
  std::vector<double> starts;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") starts.push_back(e["ts"].get<double>());
  EXPECT_EQ(starts, (std::vector<double>{0.5, 1.0})) << "rank 1's span moved onto rank 0's clock";
  r = run_cli("trace export --chrome " + quoted(dir) + " " + quoted(dir / "rank-1.jsonl"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output,
            fmt::format("dpscope: error: OUT {} is one of the files the input IN {} holds: it would "
                        "be overwritten\n",
                        (dir / "rank-1.jsonl").string(), dir.string()));
}

TEST(TraceCli, ADirectoryThatIsNoRunIsOneLineAndExitCode2) {
  const auto dir = testing::scratch_dir();
  testing::write_file(dir / "rank-0.jsonl", testing::rank_header(0, 2, 0));
  testing::write_file(dir / "rank-1.jsonl", testing::header_line());
  const RunResult r = run_cli("trace stats " + quoted(dir));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output,
            fmt::format("dpscope: error: {}: its header has no \"process\" entry (rank, world_size, "
                        "clock offset), so it is no process rank's trace (train --backend mpi --trace "
                        "DIR writes them)\n",
                        (dir / "rank-1.jsonl").string()));
}

TEST(TraceCli, LenientStatsOfADirectoryNameTheRankFileOfEachSkippedLine) {
  const auto dir = testing::scratch_dir();
  testing::write_file(dir / "rank-0.jsonl", testing::rank_header(0, 1, 0) + "{\"type\":\"span\"}\n" +
                                                testing::rank_span(0, 5, "a") + "{\"type\":");
  const RunResult r = run_cli("trace stats --lenient " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string file = (dir / "rank-0.jsonl").string();
  EXPECT_NE(r.output.find(fmt::format("dpscope: warning: skipped {}:2: missing field 'ts'\n", file)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("dpscope: warning: {} ends with an incomplete line", file)),
            std::string::npos)
      << r.output;
}

// `trace merge` leaves a rank file's incomplete last line out, as `stats` and `export` do, and says so
// in the same warning line.
TEST(TraceCli, MergeWarnsOfARankFilesIncompleteLastLine) {
  const auto dir = testing::scratch_dir();
  testing::write_file(dir / "rank-0.jsonl",
                      testing::rank_header(0, 1, 0) + testing::rank_span(0, 5, "a") + "{\"type\":");
  const auto out = dir / "merged.jsonl";
  const RunResult r = run_cli("trace merge " + quoted(dir) + " " + quoted(out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("dpscope: warning: {} ends with an incomplete line (still being "
                                      "written?); it was left out\n",
                                      (dir / "rank-0.jsonl").string())),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_trace(out).events.size(), 1u);
}

}  // namespace
}  // namespace dpscope::trace
