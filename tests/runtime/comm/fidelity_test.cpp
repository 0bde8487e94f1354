// docs/fidelity.md is what the published nccl-tests tables and the cost model give today, and the
// systems the fidelity goal is claimed for stay within it.
#include "dpscope/comm/nccl_fidelity.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope_bench/collective_bench.hpp"
#include "fidelity_tables.hpp"
#include "support/errors.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

TEST(Fidelity, DocsFidelityIsRegeneratedFromTheTables) {
  std::ifstream in(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "docs/fidelity.md", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), fidelity_markdown(evaluate_all(), evaluate_not_compared()))
      << "docs/fidelity.md is stale: run build/ci/bin/fidelity_report tests/data/nccl-tests docs/fidelity.md";
}

TEST(Fidelity, EverySystemHasASourceAndAFullSizeRange) {
  const std::vector<MeasuredSystem> systems = load_measured_systems(kTables);
  ASSERT_GE(systems.size(), 5u);
  for (const MeasuredSystem& s : systems) {
    EXPECT_EQ(s.source.rfind("https://", 0), 0u) << s.id;
    // From the latency-bound sizes (nccl-tests' 8 B; pages that publish only from 1 KiB up) to at
    // least nccl-tests' README's 128M.
    EXPECT_LE(s.rows.front().bytes, 1024u) << s.id;
    EXPECT_GE(s.rows.back().bytes, 128ull << 20) << s.id;
  }
}

// The median error of every system stays within its bound: the goal's 10 % where the goal is met,
// today's error where it is not (docs/fidelity.md says which, and why).
TEST(Fidelity, MedianErrorOfEverySystemStaysWithinItsBound) {
  for (const FidelityResult& r : evaluate_all()) {
    EXPECT_LE(r.system.median_bound, 0.25) << r.system.id << ": a bound that loose guards nothing";
    EXPECT_LE(r.median_error, r.system.median_bound) << r.system.id << ": median " << r.median_error;
  }
}

// The summary of what is reached is counted from the results, so it follows the tables and the model.
TEST(Fidelity, SummaryCountsTheSystemsThatMeetEachGoal) {
  const std::vector<FidelityResult> all = evaluate_all();
  ASSERT_FALSE(all.empty());
  std::vector<FidelityResult> two = {all.front(), all.front()};
  two[0].system.nodes = two[1].system.nodes = 2;  // two clusters, whichever table sorts first
  two[0].median_error = 0.05;                     // both goals met
  two[0].worst_error = 0.20;
  two[1].median_error = 0.10;  // the median goal just met, the worst-size goal not
  two[1].worst_error = 0.26;
  const std::string md = fidelity_markdown(two);
  EXPECT_NE(
      md.find("The median goal is met by 2 of the 2 tables, the worst-size goal by 1; 0 of them are of a "
              "single node."),
      std::string::npos)
      << md.substr(0, 2000);
  EXPECT_NE(md.find("Single nodes validated size by size: none; not yet: an H100 or H200 NVSwitch node, an "
                    "A100 NVSwitch node, a PCIe machine, a V100 cube mesh."),
            std::string::npos);
  two[1].system.nodes = 1;  // a single-node table moves its topology to the validated ones
  two[1].system.preset = "v100-sxm2";
  const std::string one_node = fidelity_markdown(two);
  EXPECT_NE(one_node.find("; 1 of them is of a single node."), std::string::npos);
  EXPECT_NE(one_node.find("Single nodes validated size by size: a V100 cube mesh; not yet: an H100 or H200 "
                          "NVSwitch node, an A100 NVSwitch node, a PCIe machine."),
            std::string::npos)
      << one_node.substr(0, 2000);
}

// nccl-tests -g N: one thread launches the kernels of N GPUs one after another; the comparison adds the
// N - 1 launches after the first, from the preset's kernel launch latency, to every size.
TEST(Fidelity, OneThreadDrivingSeveralGpusAddsTheirSerialLaunches) {
  MeasuredSystem s;
  for (const MeasuredSystem& m : load_measured_systems(kTables))
    if (m.gpus_per_thread > 1) s = m;
  ASSERT_GT(s.gpus_per_thread, 1) << "a table run with nccl-tests -g > 1";
  MeasuredSystem one_per_thread = s;
  one_per_thread.gpus_per_thread = 1;
  const FidelityResult serial = evaluate_fidelity(s);
  const FidelityResult parallel = evaluate_fidelity(one_per_thread);
  const double launches_us = (s.gpus_per_thread - 1) * fidelity_preset(s).launch_latency_ns / 1e3;
  ASSERT_GT(launches_us, 0.0);
  ASSERT_EQ(serial.rows.size(), parallel.rows.size());
  // One GPU per thread is the timing-only backend's time as it is; -g N adds the N - 1 later launches.
  const AnalyticCollectives model(fidelity_preset(s), s.gpus_per_node * s.nodes);
  for (size_t i = 0; i < serial.rows.size(); ++i) {
    const CollectiveEstimate e =
        model.estimate({.op = s.op, .count = static_cast<int64_t>(s.rows[i].bytes / 4), .elem_bytes = 4});
    EXPECT_NEAR(parallel.rows[i].simulated_us, static_cast<double>(e.duration_ns) / 1e3, 1e-9)
        << s.rows[i].bytes;
    EXPECT_NEAR(serial.rows[i].simulated_us - parallel.rows[i].simulated_us, launches_us, 1e-9)
        << serial.rows[i].bytes;
  }
  EXPECT_NE(
      fidelity_markdown({serial}).find("- Launch: one thread drives " + std::to_string(s.gpus_per_thread) +
                                       " GPUs (nccl-tests `-g " + std::to_string(s.gpus_per_thread) + "`)"),
      std::string::npos);
}

// A table whose network plugin runs NCCL_PROTO=simple (EFA on p4de) is compared on a preset whose
// network carries Simple only, and its section says so with the source.
TEST(Fidelity, ATableRunWithTheSimpleProtocolOnlyIsModelledSo) {
  MeasuredSystem s;
  for (const MeasuredSystem& m : load_measured_systems(kTables))
    if (!m.nccl_proto.empty()) s = m;
  ASSERT_EQ(s.nccl_proto, "Simple") << "a table run with NCCL_PROTO=simple";
  EXPECT_TRUE(fidelity_preset(s).cluster.simple_only);
  const FidelityResult r = evaluate_fidelity(s);
  for (const FidelityRow& row : r.rows) EXPECT_NE(row.choice.find("/Simple"), std::string::npos) << row.bytes;
  EXPECT_NE(fidelity_markdown({r}).find("- Protocol: Simple only across nodes (" + s.nccl_proto_note + ")"),
            std::string::npos);
  MeasuredSystem every_protocol = s;
  every_protocol.nccl_proto.clear();
  EXPECT_FALSE(fidelity_preset(every_protocol).cluster.simple_only);
}

// A table whose command forces an algorithm (NCCL_ALGO=NVLS on Azure's H100 node) is compared with the
// cost model forced the same way, at every size, and its section says so.
TEST(Fidelity, ATableRunWithAForcedAlgorithmIsModelledSo) {
  MeasuredSystem s;
  for (const MeasuredSystem& m : load_measured_systems(kTables))
    if (m.command.find("NCCL_ALGO=NVLS") != std::string::npos) s = m;
  ASSERT_FALSE(s.id.empty()) << "a table run with NCCL_ALGO=NVLS";
  const HardwarePreset preset = fidelity_preset(s);
  const NcclFabric fabric = *nccl_fabric(preset, s.gpus_per_node * s.nodes, s.nodes);
  const double launches_us = (s.gpus_per_thread - 1) * preset.launch_latency_ns / 1e3;
  const FidelityResult r = evaluate_fidelity(s);
  ASSERT_EQ(r.rows.size(), s.rows.size());
  for (const FidelityRow& row : r.rows) {
    EXPECT_EQ(row.choice, "nvls/Simple") << row.bytes;
    const NcclPrediction forced = predict_nccl(fabric, s.op, row.bytes, {.algo = NcclAlgo::kNvls});
    EXPECT_NEAR(row.simulated_us, static_cast<double>(forced.time_ns) / 1e3 + launches_us, 1e-9) << row.bytes;
  }
  // Unforced, the model picks ring or tree for the small sizes: forcing is what the comparison did.
  MeasuredSystem unforced = s;
  unforced.command = "./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8";
  EXPECT_NE(evaluate_fidelity(unforced).rows.front().choice, "nvls/Simple");
  EXPECT_NE(
      fidelity_markdown({r}).find("- Algorithm: nvls for every size, as the command's NCCL_ALGO forces it"),
      std::string::npos);
  EXPECT_EQ(fidelity_markdown({evaluate_fidelity(unforced)}).find("- Algorithm:"), std::string::npos);
}

// "lo-hi %": the range of the medians of the one-node or the multi-node all-reduce tables (what the
// docs' sentences quote), in whole percent.
std::string median_range(const std::vector<FidelityResult>& all, bool one_node) {
  double lo = 1e9, hi = 0.0;
  for (const FidelityResult& r : all)
    if ((r.system.nodes == 1) == one_node && r.system.op == OpType::kAllReduce) {
      lo = std::min(lo, r.median_error);
      hi = std::max(hi, r.median_error);
    }
  return std::to_string(static_cast<int>(std::lround(100 * lo))) + "-" +
         std::to_string(static_cast<int>(std::lround(100 * hi))) + " %";
}

// docs/collectives.md and docs/scaling.md quote the tables' errors; they follow the tables and the model.
TEST(Fidelity, TheDocsQuoteTheErrorsTheTablesGive) {
  const std::vector<FidelityResult> all = evaluate_all();
  const std::string collectives = read_doc("collectives.md");
  const std::string scaling = read_doc("scaling.md");
  EXPECT_NE(collectives.find("(fidelity.md: median error " + median_range(all, false) + " per cluster)"),
            std::string::npos)
      << median_range(all, false);
  EXPECT_NE(scaling.find("its median error is " + median_range(all, false) + " per cluster"),
            std::string::npos);
  EXPECT_NE(collectives.find("(fidelity.md: median error " + median_range(all, true) + " per node;"),
            std::string::npos)
      << median_range(all, true);
  // The H100 node with NVLS forced: within 10 % from 128 MiB up, too fast by up to 16 % from 16 to 64 MiB.
  const auto h100 = std::find_if(all.begin(), all.end(), [](const FidelityResult& r) {
    return r.system.command.find("NCCL_ALGO=NVLS") != std::string::npos;
  });
  ASSERT_NE(h100, all.end());
  double medium_worst = 0.0;
  for (const FidelityRow& row : h100->rows) {
    if (row.bytes >= (128ull << 20)) {
      EXPECT_LE(row.error, 0.10) << row.bytes;
    }
    if (row.bytes >= (16ull << 20) && row.bytes <= (64ull << 20)) {
      EXPECT_GT(row.simulated_busbw, row.measured_busbw) << row.bytes;
      medium_worst = std::max(medium_worst, row.error);
    }
  }
  EXPECT_EQ(std::lround(100 * medium_worst), 16);
  // docs/fidelity.md: the small sizes are the -g 8 run's serial launches plus 2-10 us (to 32 KiB) or
  // about 20 us (64 KiB to 2 MiB), and the rows up to 2 MiB are the table's worst.
  const double launches_us =
      (h100->system.gpus_per_thread - 1) * fidelity_preset(h100->system).launch_latency_ns / 1e3;
  double small_worst = 0.0, large_worst = 0.0;
  for (const FidelityRow& row : h100->rows) {
    const double beyond_us = row.measured_us - launches_us;
    if (row.bytes <= (32u << 10)) {
      EXPECT_GE(beyond_us, 2.0) << row.bytes;
      EXPECT_LE(beyond_us, 10.5) << row.bytes;
    } else if (row.bytes <= (2u << 20)) {
      EXPECT_GE(beyond_us, 15.0) << row.bytes;
      EXPECT_LE(beyond_us, 25.0) << row.bytes;
    }
    double& worst = row.bytes <= (2u << 20) ? small_worst : large_worst;
    worst = std::max(worst, row.error);
  }
  EXPECT_GT(small_worst, large_worst);
  // One A100 node: the rows from 8 MiB to 128 MiB are predicted too fast and are the table's worst.
  const auto a100 = std::find_if(all.begin(), all.end(), [](const FidelityResult& r) {
    return r.system.nodes == 1 && r.system.preset == "a100-sxm";
  });
  ASSERT_NE(a100, all.end());
  double medium_least = 1e9, elsewhere_worst = 0.0;
  for (const FidelityRow& row : a100->rows) {
    if (row.bytes >= (8u << 20) && row.bytes <= (128u << 20)) {
      EXPECT_GT(row.simulated_busbw, row.measured_busbw) << row.bytes;
      medium_least = std::min(medium_least, row.error);
    } else {
      elsewhere_worst = std::max(elsewhere_worst, row.error);
    }
  }
  EXPECT_GT(medium_least, elsewhere_worst);
  EXPECT_NE(
      scaling.find("within 10 % of Azure's ND H100 v5 table from 128 MiB up and up to 16 % too fast between "
                   "16 and 64 MiB"),
      std::string::npos);
}

TEST(Fidelity, MalformedTablesAreRefusedWithFileAndLine) {
  const testing::TempDir temp;
  const std::filesystem::path& dir = temp.path();
  const std::filesystem::path bad = dir / "bad.csv";
  std::ofstream(bad) << "# system: x\nsize_bytes,time_us,algbw_gbps,busbw_gbps\n8,fast,0,0\n";
  const testing::Outcome got = testing::error_of([&] { load_measured_system(bad); });
  EXPECT_EQ(got.kind, ErrorKind::kFormat);
  EXPECT_EQ(got.message, bad.string() + ":3: time_us 'fast' is not a number");
  std::ofstream(bad) << "# system: x\nsize,time\n";
  EXPECT_EQ(testing::error_of([&] { load_measured_system(bad); }).message,
            bad.string() + ":2: expected the header size_bytes,time_us,algbw_gbps,busbw_gbps");
  std::ofstream(bad) << "# system: x\n# source: y\n# command: z\n# preset: v100-sxm2\n# gpus_per_node: 8\n"
                        "# nodes: 1\n# gpus_per_thread: 9\n# collective: all_reduce\n"
                        "size_bytes,time_us,algbw_gbps,busbw_gbps\n8,1,0,0\n";
  EXPECT_EQ(testing::error_of([&] { load_measured_system(bad); }).message,
            bad.string() + ": gpus_per_thread 9 must be between 1 and gpus_per_node (8)");
  const std::string table =
      "# system: x\n# source: y\n# command: z\n# preset: a100-sxm\n# gpus_per_node: 8\n"
      "# nodes: 2\n# collective: all_reduce\n";
  std::ofstream(bad)
      << table
      << "# nccl_proto: LL\n# nccl_proto_note: n\nsize_bytes,time_us,algbw_gbps,busbw_gbps\n8,1,0,0\n";
  EXPECT_EQ(
      testing::error_of([&] { load_measured_system(bad); }).message,
      bad.string() + ": nccl_proto 'LL': only Simple (a network plugin's NCCL_PROTO=simple) is modelled");
  std::ofstream(bad) << table << "# nccl_proto: Simple\nsize_bytes,time_us,algbw_gbps,busbw_gbps\n8,1,0,0\n";
  EXPECT_EQ(testing::error_of([&] { load_measured_system(bad); }).message,
            bad.string() + ": no '# nccl_proto_note:' line");
  std::ofstream(bad) << "# system: x\n# source: y\n# command: NCCL_ALGO=CollNetDirect all_reduce_perf -g 8\n"
                        "# preset: h100-sxm\n# gpus_per_node: 8\n# nodes: 1\n# collective: all_reduce\n"
                        "size_bytes,time_us,algbw_gbps,busbw_gbps\n8,1,0,0\n";
  EXPECT_EQ(testing::error_of([&] { load_measured_system(bad); }).message,
            bad.string() + ": the command's NCCL_ALGO=CollNetDirect: only Ring, Tree and NVLS are modelled");
  std::ofstream(bad) << "size_bytes,time_us,algbw_gbps,busbw_gbps\n8,1,0,0\n";
  EXPECT_EQ(testing::error_of([&] { load_measured_system(bad); }).message,
            bad.string() + ": no '# system:' line");
  std::filesystem::remove_all(dir);
}

// A table that states NVLS's latency (nvls_latency_us) states its preset's figure, so the two cannot
// drift apart; the one table it was fitted on meets its fitted row to the rounding of the fit.
TEST(Fidelity, TheNvlsLatencyIsThePresetsAndFitsOneRowOfOneTable) {
  int fitted_on = 0, judged_on = 0;
  for (const FidelityResult& r : evaluate_all()) {
    const MeasuredSystem& s = r.system;
    if (s.nvls_latency_us < 0) continue;
    EXPECT_DOUBLE_EQ(s.nvls_latency_us, find_preset(s.preset).nccl.nvls_latency_us) << s.id;
    EXPECT_FALSE(s.nvls_latency_note.empty()) << s.id;
    if (s.nvls_latency_note.rfind("fitted on this table's 1 KiB row", 0) == 0) {
      ++fitted_on;
      ASSERT_EQ(r.rows.front().bytes, 1024u) << s.id;
      EXPECT_NEAR(r.rows.front().simulated_us, r.rows.front().measured_us, 0.05) << s.id;
    } else {
      ++judged_on;
    }
    EXPECT_NE(fidelity_markdown({r}).find("- NVLS latency: " + fmt::format("{:g}", s.nvls_latency_us) +
                                          " us, " + s.nvls_latency_note),
              std::string::npos)
        << s.id;
  }
  EXPECT_EQ(fitted_on, 1);
  EXPECT_GE(judged_on, 1);
}

TEST(Fidelity, AnNvlsLatencyWithoutItsNoteIsRefused) {
  const testing::TempDir temp;
  const std::filesystem::path bad = temp.path() / "nvls.csv";
  std::ofstream(bad) << "# system: x\n# source: y\n# command: z\n# preset: h100-sxm\n# gpus_per_node: 8\n"
                        "# nodes: 1\n# nvls_latency_us: 2\n# collective: all_reduce\n"
                        "size_bytes,time_us,algbw_gbps,busbw_gbps\n8,1,0,0\n";
  const testing::Outcome got = testing::error_of([&] { load_measured_system(bad); });
  EXPECT_EQ(got.kind, ErrorKind::kFormat);
  EXPECT_EQ(got.message, bad.string() + ": no '# nvls_latency_note:' line");
  std::filesystem::remove(bad);
}

// docs/fidelity.md, "NVLS inside a node": what the H100 and H200 tables say of the model's NVLS
// latency, checked row by row.
TEST(Fidelity, TheNvlsClaimsFollowTheH100AndH200Tables) {
  const std::vector<FidelityResult> all = evaluate_all();
  auto table = [&](const std::string& preset) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const FidelityResult& r) {
      return r.system.preset == preset && r.system.command.find("NCCL_ALGO=NVLS") != std::string::npos;
    });
    EXPECT_NE(it, all.end()) << preset;
    return *it;
  };
  const FidelityResult h100 = table("h100-sxm");
  const FidelityResult h200 = table("h200");
  // H100: too fast by 13-50 % from 16 KiB to 512 KiB, worst at 64 KiB; too slow by 20 % at 2 MiB.
  for (const FidelityRow& row : h100.rows) {
    if (row.bytes >= (16u << 10) && row.bytes <= (512u << 10)) {
      EXPECT_GT(row.simulated_busbw, row.measured_busbw) << row.bytes;
      EXPECT_GE(std::lround(100 * row.error), 13) << row.bytes;
      EXPECT_LE(std::lround(100 * row.error), 50) << row.bytes;
    }
    if (row.bytes == (2u << 20)) {
      EXPECT_LT(row.simulated_busbw, row.measured_busbw);
      EXPECT_EQ(std::lround(100 * row.error), 20);
    }
  }
  EXPECT_EQ(h100.worst_bytes, 64u << 10);
  // H200: rows to 512 KiB within 1 us of the seven launches; the model too slow on every row to
  // 4 MiB, by 6-17 % to 256 KiB and 23-35 % from 512 KiB; the launches alone exceed the 1 KiB row.
  const double launches_us = 7 * fidelity_preset(h200.system).launch_latency_ns / 1e3;
  ASSERT_EQ(h200.system.gpus_per_thread, 8);
  EXPECT_EQ(std::lround(10 * launches_us), 307);
  EXPECT_EQ(std::lround(10 * h200.rows.front().measured_us), 299);
  for (const FidelityRow& row : h200.rows) {
    if (row.bytes <= (512u << 10)) {
      EXPECT_LE(std::abs(row.measured_us - launches_us), 1.0) << row.bytes;
    }
    if (row.bytes > (4u << 20)) continue;
    EXPECT_LT(row.simulated_busbw, row.measured_busbw) << row.bytes;
    const long pct = std::lround(100 * row.error);
    if (row.bytes <= (256u << 10)) {
      EXPECT_GE(pct, 6) << row.bytes;
      EXPECT_LE(pct, 17) << row.bytes;
    } else {
      EXPECT_GE(pct, 23) << row.bytes;
      EXPECT_LE(pct, 35) << row.bytes;
    }
  }
  // The H100 preset's launches, for the sentence that names both.
  EXPECT_DOUBLE_EQ(fidelity_preset(h100.system).launch_latency_ns, 3350.0);
  EXPECT_DOUBLE_EQ(fidelity_preset(h200.system).launch_latency_ns, 4390.0);
}

// Past two nodes (NVIDIA/nccl-tests#309: 4 nodes of 8 H100 over InfiniBand NDR) the model is judged
// with no fitted number: the network hop is NCCL's own InfiniBand figure. Its rows past the worst-size
// goal are the run's spikes, each a multiple of the next larger size's time, as docs/fidelity.md says.
TEST(Fidelity, BeyondTwoNodesNothingIsFittedAndTheMedianGoalHolds) {
  const std::vector<FidelityResult> all = evaluate_all();
  int clusters = 0;
  for (const FidelityResult& r : all) {
    if (r.system.nodes <= 2) continue;
    ++clusters;
    EXPECT_EQ(r.system.nic_latency_us, 0.0) << r.system.id;
    EXPECT_TRUE(r.system.nic_latency_note.empty()) << r.system.id;
    EXPECT_LE(r.median_error, 0.10) << r.system.id;
    for (size_t i = 0; i < r.rows.size(); ++i) {
      if (r.rows[i].error <= 0.25) continue;
      // A larger message took at least 1.2x less time: a spike of the run, not the model's miss.
      ASSERT_LT(i + 1, r.rows.size()) << r.system.id;
      EXPECT_GE(r.rows[i].measured_us / r.rows[i + 1].measured_us, 1.2)
          << r.system.id << " " << r.rows[i].bytes;
    }
  }
  EXPECT_GE(clusters, 1);
  const std::string md = fidelity_markdown(all);
  EXPECT_NE(md.find("- **Beyond two nodes the model is compared with no number fitted**: "
                    "dell-xe9680-h100-vm-4nodes (4 x 8, 0 us extra per network hop): median "),
            std::string::npos);
  // Without such a cluster the bullet is absent.
  std::vector<FidelityResult> two_or_fewer;
  for (const FidelityResult& r : all)
    if (r.system.nodes <= 2) two_or_fewer.push_back(r);
  EXPECT_EQ(fidelity_markdown(two_or_fewer).find("Beyond two nodes"), std::string::npos);
}

// The tables of 2, 4 and 8 nodes of one H100 cluster start at 1 MiB, so they wait in not-compared/
// (EverySystemHasASourceAndAFullSizeRange); docs/scaling.md and docs/collectives.md quote their
// medians, which follow the tables and the model.
TEST(Fidelity, TheDocsQuoteTheClusterOfEightNodes) {
  const std::string scaling = read_doc("scaling.md");
  const std::string collectives = read_doc("collectives.md");
  for (int nodes : {2, 4, 8}) {
    const FidelityResult r = evaluate_fidelity(
        load_measured_system(kTables / "not-compared" / fmt::format("ib-ndr-h100-{}nodes.csv", nodes)));
    EXPECT_EQ(r.system.nodes, nodes);
    EXPECT_EQ(r.rows.front().bytes, 1u << 20);
    EXPECT_LE(r.median_error, r.system.median_bound) << nodes;
    const std::string quote = fmt::format("{} nodes: {:.1f} %", nodes, 100 * r.median_error);
    EXPECT_NE(scaling.find(quote), std::string::npos) << quote;
    EXPECT_NE(collectives.find(quote), std::string::npos) << quote;
    if (nodes == 8) {
      const std::string large = fmt::format("{:.0f} GB/s of bus bandwidth measured and {:.0f} GB/s simulated",
                                            r.rows.back().measured_busbw, r.rows.back().simulated_busbw);
      EXPECT_EQ(r.rows.back().bytes, 8ull << 30);
      EXPECT_NE(scaling.find(large), std::string::npos) << large;
    }
  }
  // The compared table of four nodes.
  for (const FidelityResult& r : evaluate_all()) {
    if (r.system.nodes <= 2) continue;
    auto size_words = [](uint64_t b) {
      const char* units[] = {"B", "KiB", "MiB", "GiB"};
      int u = 0;
      while (u < 3 && b >= 1024 && b % 1024 == 0) {
        b /= 1024;
        ++u;
      }
      return fmt::format("{} {}", b, units[u]);
    };
    const std::string quote =
        fmt::format("{} nodes of {} GPUs from {} to {} in fidelity.md, median {:.1f} %", r.system.nodes,
                    r.system.gpus_per_node, size_words(r.rows.front().bytes), size_words(r.rows.back().bytes),
                    100 * r.median_error);
    EXPECT_NE(scaling.find(quote), std::string::npos) << quote;
  }
}

// The NVLS finding names one known difference from NCCL it keeps: NCCL runs NVLS on all its NVLS
// channels at every size, while the model's NVLS bandwidth grows with the channels a message fills
// (32 KiB each, Simple's threshold). If the model changes, the finding must change with it.
TEST(Fidelity, TheNvlsFindingNamesTheChannelRampItKeeps) {
  const NcclFabric f = *nccl_fabric(find_preset("h100-sxm"), 8, 1);
  const NcclChoice nvls{.algo = NcclAlgo::kNvls};
  EXPECT_EQ(predict_nccl(f, OpType::kAllReduce, 64u << 10, nvls).channels, 2);
  EXPECT_EQ(predict_nccl(f, OpType::kAllReduce, 32u << 10, nvls).channels, 1);
  EXPECT_FALSE(f.host_memory_path);
  const std::string md = fidelity_markdown(evaluate_all());
  EXPECT_NE(md.find("with a bandwidth that grows with the channels a message fills, 32 KiB each (Simple's "
                    "threshold)"),
            std::string::npos);
}

// The NVLS finding's comparison: NVLS timed as NCCL runs it (all channels, NCCL's chunks, three
// stages; nvls_as_nccl_runs) against the two tables, recomputed here. The model keeps its ramp
// because timed so the H100 table's worst row moves further off, though the medians and the H200
// table's worst row come closer; the finding quotes each figure. If the data or either timing
// changes so that NCCL's timing wins on both worst rows, this fails and the model should take it.
TEST(Fidelity, NvlsTimedAsNcclRunsItIsComparedAndNotTaken) {
  const std::vector<FidelityResult> all = evaluate_all();
  struct Errors {
    double median = 0, worst = 0;
    uint64_t worst_bytes = 0;
  };
  auto as_run = [](const FidelityResult& r) {
    const HardwarePreset preset = fidelity_preset(r.system);
    const NcclFabric f = *nccl_fabric(preset, r.system.gpus_per_node, 1);
    const double launches_us = (r.system.gpus_per_thread - 1) * preset.launch_latency_ns / 1e3;
    std::vector<double> errors;
    Errors e;
    for (const FidelityRow& row : r.rows) {
      const double us = static_cast<double>(nvls_as_nccl_runs(f, row.bytes).time_ns) / 1e3 + launches_us;
      errors.push_back(std::abs(row.measured_us / us - 1.0));
      if (errors.back() > e.worst) {
        e.worst = errors.back();
        e.worst_bytes = row.bytes;
      }
    }
    std::sort(errors.begin(), errors.end());
    const size_t n = errors.size();
    e.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
    return e;
  };
  auto table = [&](std::string_view id) {
    const auto it =
        std::find_if(all.begin(), all.end(), [&](const FidelityResult& r) { return r.system.id == id; });
    EXPECT_NE(it, all.end()) << id;
    return *it;
  };
  const FidelityResult h100 = table("azure-ndv5-h100-1node");
  const FidelityResult h200 = table("azure-ndv5-h200-1node");
  const Errors run100 = as_run(h100), run200 = as_run(h200);
  EXPECT_LT(run100.median, h100.median_error);
  EXPECT_LT(run200.median, h200.median_error);
  EXPECT_LT(run200.worst, h200.worst_error);
  EXPECT_GT(run100.worst, h100.worst_error);  // why the model keeps its ramp
  EXPECT_EQ(run100.worst_bytes, 64u << 10);
  const std::string md = fidelity_markdown(all);
  EXPECT_NE(
      md.find(fmt::format("the H100 table's median error would be {:.1f} % (the model's: {:.1f} %) and its "
                          "worst {:.1f} % at 64 KiB",
                          100 * run100.median, 100 * h100.median_error, 100 * run100.worst)),
      std::string::npos);
  EXPECT_NE(md.find(fmt::format("the H200 table's median {:.1f} % ({:.1f} %) and its worst {:.1f} %",
                                100 * run200.median, 100 * h200.median_error, 100 * run200.worst)),
            std::string::npos);
  // No refit: the 1 KiB row gives the presets' latency again to its rounding.
  const double fitted_us = h100.rows.front().measured_us -
                           7 * fidelity_preset(h100.system).launch_latency_ns / 1e3 -
                           3.0 * 1024 / (0.61 * 450e3);
  EXPECT_NEAR(fitted_us, find_preset("h100-sxm").nccl.nvls_latency_us, 0.05);
  EXPECT_NE(md.find(fmt::format("the 1 KiB row then gives a latency of {:.1f} us, so no refit", fitted_us)),
            std::string::npos);
}

// The tables of not-compared/ start above 1 KiB, so the goal does not judge them; docs/fidelity.md
// gives them a section of their own (a summary row and their rows) and the many-nodes finding, whose
// numbers are their rows' and the model's: the 8-node cluster's largest size, and the same system on
// 10 nodes, where the model's bounds past two nodes (NICs for the ring, half of them for NVLS-tree)
// leave the bus bandwidth where 8 nodes have it.
TEST(Fidelity, TheTablesOutsideTheSizeRangeHaveTheirOwnSection) {
  const std::vector<FidelityResult> outside = evaluate_not_compared();
  ASSERT_GE(outside.size(), 3u);
  const std::string md = fidelity_markdown(evaluate_all(), outside);
  const size_t section = md.find("\n## Tables outside the goal's size range (not compared)\n");
  ASSERT_NE(section, std::string::npos);
  const FidelityResult* eight = nullptr;
  for (const FidelityResult& r : outside) {
    EXPECT_GT(r.rows.front().bytes, 1024u) << r.system.id << ": it belongs among the compared tables";
    const std::string row =
        fmt::format("| {} | all_reduce | {} x {} |", r.system.id, r.system.nodes, r.system.gpus_per_node);
    EXPECT_GT(md.find(row), section) << row;
    EXPECT_GT(md.find("\n## " + r.system.id + "\n"), section) << r.system.id;
    EXPECT_NE(md.find(fmt::format("{} ({} x {}, 1 MiB - 8 GiB): median {:.1f} %", r.system.id, r.system.nodes,
                                  r.system.gpus_per_node, 100 * r.median_error)),
              std::string::npos)
        << r.system.id;
    if (r.system.nodes == 8) eight = &r;
  }
  ASSERT_NE(eight, nullptr);
  EXPECT_LE(eight->median_error, 0.10);
  const FidelityRow& last = eight->rows.back();
  EXPECT_NE(
      md.find(fmt::format("at 8 GiB it measured {:.0f} GB/s of bus bandwidth where the model gives {:.0f}",
                          last.measured_busbw, last.simulated_busbw)),
      std::string::npos);
  MeasuredSystem ten = eight->system;
  ten.nodes = 10;
  ten.rows = {eight->system.rows.back()};
  const FidelityRow at_ten = evaluate_fidelity(ten).rows.front();
  EXPECT_NEAR(at_ten.simulated_busbw, last.simulated_busbw, 0.02 * last.simulated_busbw);
  EXPECT_NE(
      md.find(fmt::format("on 10 such nodes (80 GPUs) it gives 8 GiB {:.0f} GB/s", at_ten.simulated_busbw)),
      std::string::npos);
  // The summary counts only the compared tables; without not-compared tables there is no section.
  const std::string compared_only = fidelity_markdown(evaluate_all());
  EXPECT_EQ(compared_only.find("Tables outside the goal's size range"), std::string::npos);
  EXPECT_EQ(compared_only.find("Many nodes"), std::string::npos);
  EXPECT_EQ(md.substr(0, md.find("- **Many nodes")), compared_only.substr(0, md.find("- **Many nodes")));
}

}  // namespace
}  // namespace dpscope
