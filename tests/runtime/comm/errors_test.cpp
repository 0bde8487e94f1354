// The remaining error messages of the collectives: preset [network] tables, network and world
// construction, point-to-point failures on the sending side, tensor-list checks, backends without
// an op, and bench options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <latch>

#include "comm_test_util.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope_bench/collective_bench.hpp"

namespace dpscope {
namespace {

using test::round_options;
using test::round_preset;
using ::testing::HasSubstr;

struct Caught {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
};

Caught catch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  return {ErrorKind::kInternal, "no error"};
}

// ---- presets ----

TEST(PresetNetwork, ShippedPresetsDescribeTheirTopologies) {
  EXPECT_DOUBLE_EQ(find_preset("h100-sxm").network.protocol_efficiency, 0.8);
  const HardwarePreset t4 = find_preset("t4");
  EXPECT_EQ(t4.network.gpus_per_switch, 2);
  EXPECT_DOUBLE_EQ(t4.network.switch_uplink.bandwidth_bytes_per_s, 16e9);
  const HardwarePreset v100 = find_preset("v100-sxm2");
  EXPECT_EQ(v100.network.max_gpus, 8);
  std::vector<int> links_per_gpu(8, 0);
  for (const NvlinkConnection& c : v100.network.nvlinks) {
    links_per_gpu[c.a] += c.links;
    links_per_gpu[c.b] += c.links;
  }
  EXPECT_EQ(links_per_gpu, std::vector<int>(8, 6)) << "every V100 has six NVLinks";
}

std::filesystem::path preset_with(const std::string& network_table) {
  const std::filesystem::path path = test::temp_path("preset.toml");
  std::ofstream(path) << "name = \"X\"\nmemory_gb = 1.0\nmemory_bandwidth_gbps = 1.0\nfp32_tflops = 1.0\n"
                         "launch_latency_us = 1.0\ntopology = \"nvswitch\"\n"
                         "[host_link]\nkind = \"pcie\"\nbandwidth_gbps = 1.0\nlatency_us = 1.0\n"
                         "[peer_link]\nkind = \"nvlink\"\nbandwidth_gbps = 1.0\nlatency_us = 1.0\n"
                      << network_table;
  return path;
}

TEST(PresetNetwork, BadEntriesNameTheFileAndKey) {
  const auto file = preset_with("[network]\nnvlinks = [[0, 0, 1]]\n");
  const Caught same = catch_error([&] { load_preset_file(file); });
  EXPECT_EQ(same.kind, ErrorKind::kFormat);
  EXPECT_EQ(same.message, fmt::format("preset {}: bad network.nvlinks entry [0, 0, 1]", file.string()));
  const auto pairs = preset_with("[network]\nnvlinks = [[0, 1]]\n");
  EXPECT_EQ(
      catch_error([&] { load_preset_file(pairs); }).message,
      fmt::format("preset {}: network.nvlinks entries must be [gpu_a, gpu_b, link_count]", pairs.string()));
  const auto eff = preset_with("[network]\nprotocol_efficiency = 1.5\n");
  EXPECT_EQ(catch_error([&] { load_preset_file(eff); }).message,
            fmt::format("preset {}: network.protocol_efficiency must be in (0, 1], got 1.5", eff.string()));
  const auto alone = preset_with("[network]\none_flow_efficiency = -0.1\n");
  EXPECT_EQ(
      catch_error([&] { load_preset_file(alone); }).message,
      fmt::format("preset {}: network.one_flow_efficiency must be in [0, 1], got -0.1", alone.string()));
  const auto text = preset_with("[network]\nmax_gpus = \"eight\"\n");
  EXPECT_EQ(catch_error([&] { load_preset_file(text); }).message,
            fmt::format("preset {}: key 'network.max_gpus' must be a number", text.string()));
}

// ---- network and world construction ----

TEST(NetworkErrors, IncompleteTopologyDescriptions) {
  EXPECT_EQ(catch_error([] { NetworkModel(round_preset(), 0); }).message,
            "a network needs at least one GPU, got 0");
  HardwarePreset no_peer = round_preset();
  no_peer.peer_link.bandwidth_bytes_per_s = 0;
  EXPECT_EQ(catch_error([&] { NetworkModel(no_peer, 2); }).message,
            "preset round: peer_link bandwidth must be positive");
  HardwarePreset pcie = round_preset("pcie-host");
  pcie.network.gpus_per_switch = 2;
  EXPECT_EQ(catch_error([&] { NetworkModel(pcie, 4); }).message,
            "preset round: pcie-host with gpus_per_switch needs [network.switch_uplink]");
  EXPECT_EQ(catch_error([] { NetworkModel(round_preset("hybrid-cube-mesh"), 4); }).message,
            "preset round: hybrid-cube-mesh needs network.nvlink_gbps and network.nvlinks");
}

TEST(WorldErrors, DevicesTimeoutsAndRanks) {
  SimWorldOptions o = round_options();
  o.timeout = Milliseconds(0);
  EXPECT_EQ(catch_error([&] { SimWorld::create(2, o); }).message, "timeout must be positive, got 0 ms");
  SimWorldOptions three = round_options();
  three.devices = {Device::sim(0, *three.hardware)};
  EXPECT_EQ(catch_error([&] { SimWorld::create(2, three); }).message, "world of 2 ranks given 1 devices");
  SimWorldOptions cpu = round_options();
  cpu.devices = {Device::cpu()};
  EXPECT_EQ(catch_error([&] { SimWorld::create(1, cpu); }).message,
            "the sim backend needs simulated devices (sim:N), got cpu");
  auto world = SimWorld::create(2, round_options());
  EXPECT_EQ(catch_error([&] { world->device(2); }).message, "rank 2 out of range for a world of 2");
  EXPECT_EQ(catch_error([] { spawn(std::shared_ptr<SimWorld>(), [](ProcessGroup&) {}); }).message,
            "spawn: the world is null");
}

// ---- point to point, sending side ----

TEST(SendErrors, ASendNobodyReceivesTimesOut) {
  std::latch done(1);
  Caught caught;
  spawn(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {
          done.wait();
          return;
        }
        Tensor t = Tensor::zeros({2}, pg.device());
        caught = catch_error([&] { pg.send(t, 1, {.timeout = Milliseconds(100)})->wait(); });
        done.count_down();
      },
      round_options());
  EXPECT_EQ(caught.kind, ErrorKind::kTimeout);
  EXPECT_THAT(caught.message, HasSubstr("[Rank 0] Watchdog caught collective operation timeout: "
                                        "WorkSim(SequenceNumber=0, OpType=SEND, Timeout(ms)=100) ran for "));
  EXPECT_THAT(caught.message, HasSubstr("(rank 1 never received it)"));
}

TEST(SendErrors, PeersThatReturnedCanNeverCompleteAPointToPointOp) {
  std::vector<Caught> caught(2);
  spawn(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) return;
        Tensor t = Tensor::zeros({2}, pg.device());
        caught[0] = catch_error([&] { pg.send(t, 1)->wait(); });
      },
      round_options());
  EXPECT_EQ(caught[0].kind, ErrorKind::kMismatch);
  EXPECT_EQ(caught[0].message,
            "[Rank 0] SEND (SequenceNumber=0) to rank 1 can never complete: rank 1 returned from "
            "its function without receiving it");
  spawn(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 0) return;
        Tensor t = Tensor::zeros({2}, pg.device());
        caught[1] = catch_error([&] { pg.recv(t, 0)->wait(); });
      },
      round_options());
  EXPECT_EQ(caught[1].message,
            "[Rank 1] RECV (SequenceNumber=0) from rank 0 (tag 0) can never complete: rank 0 "
            "returned from its function without sending it");
}

TEST(SendErrors, AFailingRankReleasesPointToPointWaiters) {
  std::vector<Caught> caught(3);
  try {
    spawn(
        3,
        [&](ProcessGroup& pg) {
          if (pg.rank() == 2) throw std::runtime_error("boom");
          Tensor t = Tensor::zeros({2}, pg.device());
          caught[pg.rank()] = catch_error([&] { pg.recv(t, 1 - pg.rank())->wait(); });
        },
        round_options());
  } catch (const Error&) {
  }
  EXPECT_EQ(caught[0].message,
            "[Rank 0] RECV (SequenceNumber=0) from rank 1 (tag 0) aborted because rank 2 failed: boom");
  EXPECT_EQ(caught[1].message,
            "[Rank 1] RECV (SequenceNumber=0) from rank 0 (tag 0) aborted because rank 2 failed: boom");
}

// ---- tensor checks ----

TEST(TensorChecks, ListsMustMatchInDtypeModeAndShape) {
  auto world = SimWorld::create(2, round_options());
  std::shared_ptr<ProcessGroup> pg = init_process_group("sim", 0, 2, {.world = world});
  Tensor t = Tensor::zeros({4}, pg->device());
  std::vector<Tensor> ints = {Tensor::zeros({4}, pg->device(), MemoryCategory::kBuffers, DType::kI64),
                              Tensor::zeros({4}, pg->device(), MemoryCategory::kBuffers, DType::kI64)};
  EXPECT_EQ(catch_error([&] { pg->all_gather(ints, t); }).message,
            "all_gather on rank 0: an output is int64, expected float32");
  std::vector<Tensor> metas = {Tensor::meta({4}, pg->device()), Tensor::meta({4}, pg->device())};
  EXPECT_EQ(
      catch_error([&] { pg->all_gather(metas, t); }).message,
      "all_gather on rank 0: tensors must all have data or all be timing-only (meta); an output differs");
  std::vector<Tensor> short_ones = {Tensor::zeros({3}, pg->device()), Tensor::zeros({3}, pg->device())};
  EXPECT_EQ(catch_error([&] { pg->all_gather(short_ones, t); }).message,
            "all_gather: expected every output of shape [4], got [3]");
  Tensor undefined;
  EXPECT_EQ(catch_error([&] { pg->all_reduce(undefined); }).message,
            "all_reduce on rank 0: tensor is undefined");
  EXPECT_EQ(catch_error([&] { pg->new_group({}); }).message, "new_group: the list of ranks is empty");
  EXPECT_EQ(catch_error([&] {
              pg->new_group({0, 2});
            }).message,
            "new_group: rank 2 out of range for a group of 2 ranks");
  Tensor out = Tensor::zeros({3}, pg->device()), in = Tensor::zeros({8}, pg->device());
  EXPECT_EQ(catch_error([&] { pg->reduce_scatter_tensor(out, in); }).message,
            "reduce_scatter_tensor on rank 0: output has 3 elements, expected 8 / 2 = 4");
}

// ---- backends ----

class NothingBackend final : public Backend {
 public:
  const char* name() const override { return "nothing"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return Milliseconds(1); }
  // One rank: no peer ever waits for it, so there is nobody to tell.
  void abort(ErrorKind, const std::string&) override {}
  void rank_finished() override {}

 private:
  Device device_ = Device::cpu();
};

TEST(Backends, AnOpABackendLacksNamesTheBackend) {
  ProcessGroup pg(std::make_unique<NothingBackend>());
  Tensor t = Tensor::zeros({1});
  const Caught e = catch_error([&] { pg.all_reduce(t); });
  EXPECT_EQ(e.kind, ErrorKind::kUnsupported);
  EXPECT_EQ(e.message, "backend 'nothing' does not support all_reduce");
  EXPECT_EQ(catch_error([&] { pg.barrier(); }).message, "backend 'nothing' does not support barrier");
}

// ---- bench options ----

TEST(BenchOptionsErrors, IterationsRootAndSlices) {
  auto message = [](BenchOptions o) { return catch_error([&] { validate_bench_options(o); }).message; };
  BenchOptions o;
  o.iterations = 0;
  EXPECT_EQ(message(o), "-n must be >= 1 and -w >= 0 (got 0 and 5)");
  o = BenchOptions{};
  o.collective = OpType::kBroadcast;
  o.root = 4;
  EXPECT_EQ(message(o), "-r 4 out of range for 4 ranks");
  o.root = -1;
  EXPECT_EQ(message(o), "-r -1 out of range for 4 ranks");
  // Any rank of any node may be the root; a collective without a root ignores -r, as nccl-tests does.
  o.root = 12;
  o.nodes = 2;
  o.timing_only = true;
  EXPECT_EQ(message(o), "-r 12 out of range for 8 ranks") << "4 devices on each of 2 nodes";
  o.devices = 8;
  EXPECT_NO_THROW(validate_bench_options(o));
  o = BenchOptions{};
  o.root = 7;
  EXPECT_NO_THROW(validate_bench_options(o)) << "all_reduce has no root";
  o = BenchOptions{};
  o.slices = -1;
  EXPECT_EQ(message(o), "--slices must be >= 0, got -1");
  EXPECT_EQ(catch_error([] { parse_bench_collective("gossip"); }).kind, ErrorKind::kUsage);
}

// The harness runs a collective only through its descriptor: one the benchmark has none for is a
// usage error naming it, before anything runs.
TEST(BenchOptionsErrors, ACollectiveWithoutADescriptorIsRefused) {
  BenchOptions o;
  o.collective = OpType::kBarrier;
  const Caught e = catch_error([&] { validate_bench_options(o); });
  EXPECT_EQ(e.kind, ErrorKind::kUsage);
  EXPECT_EQ(e.message, "dpscope bench does not run barrier");
  EXPECT_EQ(catch_error([&] { run_collective_bench(o); }).message, "dpscope bench does not run barrier");
}

}  // namespace
}  // namespace dpscope
