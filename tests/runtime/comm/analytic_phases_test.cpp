// The hierarchical all-reduce's phases (CollectiveEstimate::phases, docs/trace-format.md
// "Hierarchical all-reduce phases"): on a preset with NCCL's cost model they are the terms of its
// prediction (pipelined: they overlap, the last ends with the collective); on the alpha-beta model
// they run one after the other and add up to its duration; the analytic backend traces exactly
// the model's phases; the header's cluster is the modelled one.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm_test_util.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/trace/recorder.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

constexpr int64_t kBucketFloats = 25 << 18;  // 25 MiB of floats

TEST(HierarchicalPhases, NcclPipelineSplitsThePredictionsTerms) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  const AnalyticCollectives model(h100, 1024);
  const CollectiveEstimate e = model.estimate({.op = OpType::kAllReduce, .count = kBucketFloats});
  ASSERT_EQ(e.algorithm, "hierarchical");
  ASSERT_TRUE(e.phases.has_value());
  const CollectivePhases& p = *e.phases;
  // The prediction and its in-node part (the same algorithm and protocol on one node of 8).
  const uint64_t bytes = uint64_t{kBucketFloats} * 4;
  const NcclPrediction all = predict_nccl(*nccl_fabric(h100, 1024, 128), OpType::kAllReduce, bytes);
  const NcclPrediction one_node = predict_nccl(*nccl_fabric(h100, 8, 1), OpType::kAllReduce, bytes,
                                               {.algo = all.algo, .proto = all.proto});
  const int64_t latency = std::llround(all.latency_us * 1e3);
  const int64_t fill = std::llround(all.pipeline_us * 1e3);
  const int64_t stream = all.time_ns - latency - fill;
  const int64_t up = std::llround(one_node.latency_us * 1e3) / 2;
  EXPECT_GT(stream, 0);
  EXPECT_EQ(p.rs_start_ns, 0);
  EXPECT_EQ(p.rs_dur_ns, up + stream);
  EXPECT_EQ(p.net_start_ns, up);
  EXPECT_EQ(p.net_dur_ns, latency - std::llround(one_node.latency_us * 1e3) + fill + stream);
  EXPECT_EQ(p.ag_start_ns, p.net_start_ns + latency - std::llround(one_node.latency_us * 1e3) + fill);
  EXPECT_EQ(p.ag_start_ns + p.ag_dur_ns, e.duration_ns);  // the last phase ends with the collective
  // Pipelined: each phase starts before the one before it ends.
  EXPECT_LT(p.net_start_ns, p.rs_start_ns + p.rs_dur_ns);
  EXPECT_LT(p.ag_start_ns, p.net_start_ns + p.net_dur_ns);
}

TEST(HierarchicalPhases, OnlyTheHierarchicalAllReduceHasThem) {
  const AnalyticCollectives world(find_preset("h100-sxm"), 16);
  EXPECT_FALSE(
      world.estimate({.op = OpType::kAllReduce, .algorithm = Algorithm::kRing, .count = kBucketFloats})
          .phases.has_value());
  EXPECT_FALSE(world.estimate({.op = OpType::kBroadcast, .count = kBucketFloats}).phases.has_value());
  const AnalyticCollectives one_node(find_preset("h100-sxm"), 8);
  EXPECT_FALSE(one_node.estimate({.op = OpType::kAllReduce, .count = kBucketFloats}).phases.has_value());
  EXPECT_TRUE(world.estimate({.op = OpType::kAllReduce, .count = kBucketFloats}).phases.has_value());
}

// The round preset as 4-GPU nodes with 0.5 GB/s, 2 us NICs (no [nccl] table: the alpha-beta model).
HardwarePreset round_cluster() {
  HardwarePreset p = test::round_preset();
  p.cluster.gpus_per_node = 4;
  p.cluster.nic = {"nic", 0.5e9, 2000.0};
  return p;
}

TEST(HierarchicalPhases, AlphaBetaPhasesRunOneAfterTheOther) {
  const AnalyticCollectives model(round_cluster(), 16);
  const CollectiveEstimate e = model.estimate({.op = OpType::kAllReduce, .count = 16000});
  ASSERT_TRUE(e.phases.has_value());
  const CollectivePhases& p = *e.phases;
  // In the node: a ring reduce-scatter and all-gather of 4,000 floats per GPU, each half of the
  // node's ring all-reduce of 16,000 floats; across: 6 steps of 10 us and 3 reductions of 4 us.
  const int64_t inside =
      AnalyticCollectives(round_cluster(), 4)
          .estimate({.op = OpType::kAllReduce, .algorithm = Algorithm::kRing, .count = 16000})
          .duration_ns;
  EXPECT_EQ(p.rs_start_ns, 0);
  EXPECT_EQ(p.rs_dur_ns + p.ag_dur_ns, inside);
  EXPECT_EQ(p.net_start_ns, p.rs_dur_ns);
  EXPECT_EQ(p.net_dur_ns, 6 * 10'000 + 3 * 4'000);
  EXPECT_EQ(p.ag_start_ns, p.rs_dur_ns + p.net_dur_ns);
  EXPECT_EQ(p.ag_start_ns + p.ag_dur_ns, e.duration_ns);
}

TEST(HierarchicalPhases, TheBackendTracesTheModelsPhasesAndTheHeaderItsCluster) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  const auto model = std::make_shared<const AnalyticCollectives>(h100, 1024);
  const std::optional<TraceClusterInfo> cluster = model->cluster_info();
  ASSERT_TRUE(cluster.has_value());
  EXPECT_EQ(cluster->nodes, 128);
  EXPECT_EQ(cluster->gpus_per_node, 8);
  EXPECT_EQ(cluster->rails_per_node, 8);
  EXPECT_EQ(cluster->intra_topology, h100.topology);
  EXPECT_EQ(cluster->intra_link, h100.peer_link.kind);
  EXPECT_EQ(cluster->rail_kind, h100.cluster.nic.kind);
  EXPECT_EQ(cluster->rail_bandwidth_bytes_per_s, h100.cluster.nic.bandwidth_bytes_per_s);
  EXPECT_FALSE(AnalyticCollectives(h100, 8).cluster_info().has_value());

  const Device dev = Device::sim(0, h100);
  const auto path = testing::scratch_dir() / "phases.jsonl";
  TraceHeader header;
  add_trace_device(header, dev);
  header.cluster = cluster;
  {
    auto tracer = TraceRecorder::open(path, header, std::span<const Device>(&dev, 1));
    ProcessGroup group(make_analytic_backend(dev, model));
    Tensor t = Tensor::meta({kBucketFloats}, dev);
    group.all_reduce(t)->wait();
    tracer->close();
  }
  const CollectivePhases want = *model->estimate({.op = OpType::kAllReduce, .count = kBucketFloats}).phases;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(nlohmann::json::parse(line)["cluster"]["nodes"], 128);
  int collectives = 0;
  while (std::getline(in, line)) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["type"] != "span" || event["cat"] != "collective") continue;
    ++collectives;
    const nlohmann::json& a = event["args"];
    EXPECT_EQ(a["algo"], "hierarchical");
    EXPECT_EQ(a["phase_rs_start_ns"], want.rs_start_ns);
    EXPECT_EQ(a["phase_rs_dur_ns"], want.rs_dur_ns);
    EXPECT_EQ(a["phase_net_start_ns"], want.net_start_ns);
    EXPECT_EQ(a["phase_net_dur_ns"], want.net_dur_ns);
    EXPECT_EQ(a["phase_ag_start_ns"], want.ag_start_ns);
    EXPECT_EQ(a["phase_ag_dur_ns"], want.ag_dur_ns);
  }
  EXPECT_EQ(collectives, 1);
}

// docs/scaling.md quotes these phases of lesson 12's 64.02 MiB bucket on 1,024 H100s.
TEST(HierarchicalPhases, DocsNumbersOf64MiBBucket) {
  const AnalyticCollectives model(find_preset("h100-sxm"), 1024);
  const CollectiveEstimate e = model.estimate({.op = OpType::kAllReduce, .count = 67125248 / 4});
  ASSERT_TRUE(e.phases.has_value());
  const CollectivePhases& p = *e.phases;
  auto us = [](int64_t ns) { return std::round(static_cast<double>(ns) / 100.0) / 10.0; };
  EXPECT_EQ(us(e.duration_ns), 1007.5);
  EXPECT_EQ(us(p.rs_start_ns + p.rs_dur_ns), 432.0);
  EXPECT_EQ(us(p.net_start_ns), 12.5);
  EXPECT_EQ(us(p.net_start_ns + p.net_dur_ns), 995.0);
  EXPECT_EQ(us(p.ag_start_ns), 575.5);
  EXPECT_EQ(us(p.ag_start_ns + p.ag_dur_ns), 1007.5);
}

}  // namespace
}  // namespace dpscope
