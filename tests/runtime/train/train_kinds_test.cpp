// --mode, --device and --backend as enums (train/train_kinds.hpp): every word the CLI takes parses
// to its enum and name() spells it back exactly as traces, checkpoints and messages wrote the
// string before; every other word is refused with the usage line `dpscope train` has always printed.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "dpscope/train/train.hpp"
#include "support/cli.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::expect_usage_error_line;
using testing::run_dpscope;

TEST(TrainKinds, EveryModeWordRoundTrips) {
  const std::vector<std::pair<std::string, TrainMode>> words = {
      {"single", TrainMode::kSingle}, {"dp", TrainMode::kDataParallel}, {"ddp", TrainMode::kDdp}};
  for (const auto& [word, mode] : words) {
    EXPECT_EQ(parse_train_mode(word), mode) << word;
    EXPECT_EQ(name(mode), word);
  }
}

TEST(TrainKinds, EveryDeviceWordRoundTrips) {
  const std::vector<std::pair<std::string, DeviceKind>> words = {
      {"cpu", DeviceKind::kCpu}, {"sim", DeviceKind::kSim}, {"cuda", DeviceKind::kCuda}};
  for (const auto& [word, device] : words) {
    EXPECT_EQ(parse_device_kind(word), device) << word;
    EXPECT_EQ(name(device), word);
  }
}

TEST(TrainKinds, EveryBackendWordRoundTrips) {
  const std::vector<std::pair<std::string, PgBackend>> words = {{"sim", PgBackend::kSim},
                                                                {"cuda", PgBackend::kCuda},
                                                                {"nccl", PgBackend::kNccl},
                                                                {"mpi", PgBackend::kMpi}};
  for (const auto& [word, backend] : words) {
    EXPECT_EQ(parse_pg_backend(word), backend) << word;
    EXPECT_EQ(name(backend), word);
  }
}

TEST(TrainKinds, AnOtherModeIsAUsageError) {
  for (const std::string word : {"pipeline", "", "DDP", "ddp ", "fsdp"}) {
    const auto e = error_of([&] { parse_train_mode(word); });
    EXPECT_EQ(e.kind, ErrorKind::kUsage) << word;
    EXPECT_EQ(e.message, "--mode '" + word + "' is not one of single, dp, ddp");
  }
}

TEST(TrainKinds, AnOtherDeviceIsAUsageError) {
  for (const std::string word : {"tpu", "", "CUDA", "gpu"}) {
    const auto e = error_of([&] { parse_device_kind(word); });
    EXPECT_EQ(e.kind, ErrorKind::kUsage) << word;
    EXPECT_EQ(e.message, "--device '" + word + "' is not one of cpu, sim, cuda");
  }
}

TEST(TrainKinds, AnOtherBackendIsAUsageError) {
  // "cpu" is the old spelling of --device cpu: the CLI adopts it before parsing, the parser does not.
  for (const std::string word : {"gloo", "", "cpu", "NCCL"}) {
    const auto e = error_of([&] { parse_pg_backend(word); });
    EXPECT_EQ(e.kind, ErrorKind::kUsage) << word;
    EXPECT_EQ(e.message, "--backend '" + word + "' is not one of sim, cuda, nccl, mpi");
  }
}

// The CLI parses the three words after the old --backend cpu spelling is adopted and --steps,
// --epochs, --timeout and --seed are resolved, as validate() used to check them: a command line
// with several mistakes gets the same first error as before the words became enums.
TEST(TrainKinds, TheCliReportsTheSameFirstMistake) {
  const std::string run = "train --dataset spirals:64 --model 2-8-3 ";
  std::string args = run + "--mode foo --steps 0";
  expect_usage_error_line(run_dpscope(args), args, "--steps must be at least 1, got 0");
  args = run + "--steps 1 --backend cpu --device tpu --mode foo";
  expect_usage_error_line(run_dpscope(args), args,
                          "--backend cpu is the old spelling of --device cpu; give only --device tpu");
  args = run + "--steps 1 --mode foo --device bar --backend baz";
  expect_usage_error_line(run_dpscope(args), args, "--mode 'foo' is not one of single, dp, ddp");
  args = run + "--steps 1 --device bar --backend baz";
  expect_usage_error_line(run_dpscope(args), args, "--device 'bar' is not one of cpu, sim, cuda");
}

TEST(TrainKinds, TheRunJsonSpellsTheWords) {
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.device = DeviceKind::kCuda;
  config.backend = PgBackend::kNccl;
  const std::string json = config.to_json();
  EXPECT_EQ(json.rfind(R"({"mode":"ddp","device":"cuda","backend":"nccl",)", 0), 0u) << json;
}

}  // namespace
}  // namespace dpscope
