// `dpscope train` from the command line: a successful run, and one clear line with exit code 2 for
// every bad flag, missing file and mismatch between data, weights and model.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/io/npy.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using testing::run_dpscope;
using testing::TempDir;

// Expects exit code 2 and exactly one output line, "dpscope: error: <...needle...>".
// The --backend words this build has, as "--backend X is not built" lists them: the registry's names
// without those --backend does not take (analytic, which --timing-only runs).
std::string built_backend_words() {
  std::vector<std::string> words;
  for (const std::string& b : registered_backends())
    if (b != "analytic") words.push_back(b);
  return fmt::format("{}", fmt::join(words, ", "));
}

void expect_usage_error(const std::string& args, const std::string& needle) {
  testing::expect_usage_error_line(run_dpscope(args), args, needle);
}

const std::string kOk = "train --dataset spirals:64 --model 2-8-3 --batch 16 --steps 2 ";

TEST(TrainCli, TrainsWritesTraceAndWeights) {
  TempDir dir("train_ok");
  const auto r = run_dpscope(kOk + "--trace " + (dir / "t.jsonl") + " --save " + (dir / "w.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("simulated time"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("batch 16 (the whole mini-batch)"), std::string::npos) << r.output;
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  EXPECT_EQ(t.header.clock, "simulated");
  ASSERT_EQ(t.header.params.size(), 4u);
  EXPECT_EQ(t.header.params[0].name, "0.weight");
  EXPECT_EQ(t.header.params[0].shape, (Shape{8, 2}));
  const NamedTensors w = load_safetensors(dir / "w.safetensors");
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[3].first, "2.bias");
}

// The simulated microseconds per step that `dpscope train` prints ("simulated time ... (X us per
// step on PRESET)").
double simulated_us_per_step(const std::string& args) {
  const auto r = run_dpscope(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  const size_t at = r.output.find(" us per step on ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no simulated time in: " << r.output;
    return 0.0;
  }
  const size_t start = r.output.rfind('(', at) + 1;
  return std::stod(r.output.substr(start, at - start));
}

// README's "Train on simulated GPUs" block, as a reader copies it: the `same=` flags and the three
// `dpscope train $same ...` lines (their own flags, in order).
struct ReadmeRuns {
  std::string same;
  std::vector<std::string> runs;  // single, dp, ddp
  std::string prose;              // the paragraph after the block
};

ReadmeRuns readme_runs() {
  std::ifstream in(std::string(DPSCOPE_SOURCE_DIR) + "/README.md");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ReadmeRuns out;
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"re(same="([^"]*)")re"))) {
    out.same = std::regex_replace(m[1].str(), std::regex(R"(\\\n\s*)"), "");
  }
  const std::regex run(R"re(\$bin/dpscope train \$same ([^\n]*?)\s*--trace \S+\n)re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), run); it != std::sregex_iterator(); ++it)
    out.runs.push_back((*it)[1].str());
  if (const size_t at = text.find("Like for like:"); at != std::string::npos)
    out.prose = text.substr(at, text.find("\n\n", at) - at);
  return out;
}

// The value of `--flag` in `args` ("" when absent).
std::string flag_value(const std::string& args, const std::string& flag) {
  std::smatch m;
  if (!std::regex_search(args, m, std::regex("(^|\\s)" + flag + "\\s+(\\S+)"))) return "";
  return m[2].str();
}

// The review found the README's example model too small (DDP on 4 GPUs slower per step than one
// GPU) and its three runs not like for like (DataParallel and DDP without the first run's loss,
// optimizer and learning rate). The block is run as written: one shared set of flags, the same
// global batch, one GPU slowest, DataParallel between, DDP fastest, and the times the paragraph
// quotes are the runs' own (within 1 us).
TEST(TrainCli, TheReadmeComparisonIsLikeForLikeAndQuotesItsOwnRuns) {
  const ReadmeRuns readme = readme_runs();
  ASSERT_FALSE(readme.same.empty()) << "no same=\"...\" in README.md";
  ASSERT_EQ(readme.runs.size(), 3u) << "expected the single, dp and ddp lines";
  for (const char* flag :
       {"--model", "--dataset", "--loss", "--optim", "--lr", "--momentum", "--preset", "--steps"})
    EXPECT_NE(flag_value(readme.same, flag), "") << flag << " is not shared: " << readme.same;
  for (const std::string& run : readme.runs)
    for (const char* flag : {"--model", "--dataset", "--loss", "--optim", "--lr", "--momentum"})
      EXPECT_EQ(flag_value(run, flag), "") << run << " overrides the shared " << flag;
  EXPECT_EQ(flag_value(readme.runs[0], "--mode"), "single");
  EXPECT_EQ(flag_value(readme.runs[1], "--mode"), "dp");
  EXPECT_EQ(flag_value(readme.runs[2], "--mode"), "ddp");
  const int64_t single_batch = std::stoll(flag_value(readme.runs[0], "--batch"));
  EXPECT_EQ(std::stoll(flag_value(readme.runs[1], "--batch")), single_batch)
      << "DataParallel splits one batch";
  EXPECT_EQ(
      std::stoll(flag_value(readme.runs[2], "--batch")) * std::stoll(flag_value(readme.runs[2], "--devices")),
      single_batch)
      << "DDP's --batch is per rank";

  std::vector<double> us;
  for (const std::string& run : readme.runs)
    us.push_back(simulated_us_per_step("train " + readme.same + " " + run));
  ASSERT_EQ(us.size(), 3u);
  EXPECT_LT(us[1], us[0]) << "DataParallel " << us[1] << " us vs one GPU " << us[0] << " us";
  EXPECT_LT(us[2], 0.8 * us[1]) << "DDP " << us[2] << " us vs DataParallel " << us[1] << " us";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      readme.prose, m,
      std::regex(R"(about (\d+) µs on one GPU, (\d+) µs with DataParallel[^;]*?(\d+) µs\s+with DDP)")))
      << readme.prose;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(std::stod(m[i + 1].str()), us[i], 1.0)
        << "README quotes " << m[i + 1] << " us; the run takes " << us[i] << " us";
}

// The review found memory bars that moved once per phase: gradients never grew during backward.
// A traced run's memory counter follows every layer: in backward the gradients grow layer by
// layer while the activations forward kept are freed, and in forward the activations pile up.
TEST(TrainCli, MemoryMovesWithinAPhase) {
  TempDir dir("memory_moves");
  const auto r =
      run_dpscope("train --dataset blobs:256:64:4 --model 64-128-128-4 --batch 64 --steps 1 --trace " +
                  (dir / "t.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  std::vector<double> grads, acts_forward, acts_backward;
  for (const trace::Event& e : t.events) {
    if (e.type != trace::EventType::kCounter || e.known != EventName::kMemory) continue;
    double g = 0, a = 0;
    for (const auto& [key, value] : t.counter_values(t.counters[static_cast<size_t>(e.payload)])) {
      if (t.str(key) == "gradients") g = value;
      if (t.str(key) == "activations") a = value;
    }
    if (e.phase == Phase::kBackward) {
      grads.push_back(g);
      acts_backward.push_back(a);
    } else if (e.phase == Phase::kForward) {
      acts_forward.push_back(a);
    }
  }
  const auto rises = [](const std::vector<double>& v) {
    int n = 0;
    for (size_t i = 1; i < v.size(); ++i) n += v[i] > v[i - 1] ? 1 : 0;
    return n;
  };
  const auto falls = [](const std::vector<double>& v) {
    int n = 0;
    for (size_t i = 1; i < v.size(); ++i) n += v[i] < v[i - 1] ? 1 : 0;
    return n;
  };
  EXPECT_GE(rises(grads), 2) << "gradients appear layer by layer (3 Linear layers)";
  EXPECT_EQ(falls(grads), 0);
  EXPECT_GE(falls(acts_backward), 1) << "activations are freed during backward";
  EXPECT_GE(rises(acts_forward), 2) << "activations pile up layer by layer in forward";
}

TEST(TrainCli, SpiralsLossGoesDown) {
  TempDir dir("train_loss");
  const auto r = run_dpscope(
      "train --dataset spirals:512 --model 2-64-64-3 --batch 64 --epochs 8 --lr 0.1 --momentum 0.9 --trace " +
      (dir / "t.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  std::vector<double> losses;
  const uint32_t loss_name = t.find_string("loss");
  for (const trace::Event& e : t.events)
    if (e.type == trace::EventType::kCounter && e.name == loss_name)
      losses.push_back(t.counter_values(t.counters[static_cast<size_t>(e.payload)]).front().second);
  ASSERT_EQ(losses.size(), 64u);
  EXPECT_LT(losses.back(), 0.7 * losses.front());
}

TEST(TrainCli, DataParallelEndsWithTheSingleDeviceWeights) {
  TempDir dir("train_dp");
  const std::string common =
      "train --dataset blobs:120 --model 2-16-3 --batch 20 --steps 6 --lr 0.2 --momentum 0.9 --no-shuffle ";
  ASSERT_EQ(run_dpscope(common + "--save " + (dir / "single.safetensors")).exit_code, 0);
  const auto dp = run_dpscope(common + "--mode dp --devices 3 --save " + (dir / "dp.safetensors"));
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  EXPECT_NE(dp.output.find("scattered in chunks of up to 7 over 3 GPUs"), std::string::npos) << dp.output;
  const NamedTensors a = load_safetensors(dir / "single.safetensors");
  const NamedTensors b = load_safetensors(dir / "dp.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    const std::vector<float> x = a[i].second.to_vector(), y = b[i].second.to_vector();
    for (size_t j = 0; j < x.size(); ++j) ASSERT_NEAR(x[j], y[j], 1e-5f) << a[i].first << "[" << j << "]";
  }
}

TEST(TrainCli, DdpEndsWithTheSingleDeviceWeightsOfTheGlobalBatch) {
  // Unshuffled, rank r reads samples r, r+n, r+2n, ...: per step the n ranks together read the
  // same global batch as one device with n times the batch.
  TempDir dir("train_ddp");
  const std::string common =
      "train --dataset blobs:96 --model 2-16-3 --steps 5 --lr 0.2 --momentum 0.9 --no-shuffle ";
  ASSERT_EQ(run_dpscope(common + "--batch 24 --save " + (dir / "single.safetensors")).exit_code, 0);
  const auto ddp =
      run_dpscope(common +
                  "--mode ddp --devices 4 --batch 6 --bucket-mb 0.0001 --first-bucket-mb 0.00005 "
                  "--save " +
                  (dir / "ddp.safetensors"));
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  EXPECT_NE(ddp.output.find("batch 6 per rank x 4 ranks = 24 samples per step"), std::string::npos)
      << ddp.output;
  const NamedTensors a = load_safetensors(dir / "single.safetensors");
  const NamedTensors b = load_safetensors(dir / "ddp.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].second.to_vector(), y = b[i].second.to_vector();
    for (size_t j = 0; j < x.size(); ++j) ASSERT_NEAR(x[j], y[j], 1e-5f) << a[i].first << "[" << j << "]";
  }
}

TEST(TrainCli, DdpWithZeroEndsWhereThePlainOptimizerEnds) {
  TempDir dir("train_zero");
  const std::string common =
      "train --mode ddp --devices 3 --dataset blobs:90 --model 2-16-16-3 --batch 5 "
      "--optim adam --lr 0.01 --no-shuffle ";
  ASSERT_EQ(run_dpscope(common + "--steps 6 --save " + (dir / "plain.safetensors")).exit_code, 0);
  // ZeRO, interrupted after 4 steps (checkpoint with the consolidated optimizer state), then resumed.
  ASSERT_EQ(run_dpscope(common + "--zero --steps 4 --checkpoint-dir " + (dir / "ckpt")).exit_code, 0);
  const auto resumed = run_dpscope(common + "--zero --steps 6 --resume --checkpoint-dir " + (dir / "ckpt") +
                                   " --save " + (dir / "zero.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const NamedTensors a = load_safetensors(dir / "plain.safetensors");
  const NamedTensors b = load_safetensors(dir / "zero.safetensors");
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].second.to_vector(), y = b[i].second.to_vector();
    for (size_t j = 0; j < x.size(); ++j) ASSERT_NEAR(x[j], y[j], 1e-6f) << a[i].first << "[" << j << "]";
  }
}

TEST(TrainCli, DdpPitfalls) {
  const std::string ddp =
      "train --mode ddp --devices 2 --dataset spirals:64 --model 2-8-3 --batch 8 --steps 3 ";
  const auto unused = run_dpscope(ddp + "--pitfall unused-parameter");
  EXPECT_EQ(unused.exit_code, 2) << unused.output;
  EXPECT_NE(unused.output.find("Expected to have finished reduction in the prior iteration"),
            std::string::npos)
      << unused.output;
  EXPECT_EQ(run_dpscope(ddp + "--pitfall unused-parameter --find-unused-parameters").exit_code, 0);
  EXPECT_EQ(run_dpscope(ddp + "--pitfall no-average --pitfall no-set-epoch --no-sync-every 2").exit_code, 0);
}

TEST(TrainCli, BadFlagValues) {
  expect_usage_error(kOk + "--lr abc", "--lr");
  expect_usage_error(kOk + "--no-such-flag", "no-such-flag");
  expect_usage_error(kOk + "--mode pipeline", "--mode 'pipeline' is not one of single, dp, ddp");
  expect_usage_error(kOk + "--mode ddp --device cpu",
                     "--mode ddp runs one rank per GPU: use --device sim (simulated) or --device cuda");
  expect_usage_error(kOk + "--mode ddp --backend cpu",  // the old spelling of --device cpu
                     "--mode ddp runs one rank per GPU: use --device sim (simulated) or --device cuda");
  expect_usage_error(kOk + "--gpu-mem -1", "--gpu-mem must be >= 0 MiB, got -1");
  expect_usage_error(kOk + "--gpu-mem 512",
                     "--gpu-mem caps the memory of cuda devices: it needs --device cuda");
  expect_usage_error(kOk + "--bucket-mb 4", "apply to --mode ddp only");
  expect_usage_error(kOk + "--mode ddp --devices 2 --bucket-mb 0", "--bucket-mb must be > 0, got 0");
  expect_usage_error(kOk + "--mode ddp --devices 2 --no-sync-every 0", "--no-sync-every must be at least 1");
  expect_usage_error(kOk + "--mode ddp --devices 2 --comm-hook bf16", "--comm-hook 'bf16' is not one of");
  expect_usage_error(kOk + "--mode ddp --devices 2 --algo hier", "--algo 'hier' is not one of");
  expect_usage_error(kOk + "--pitfall slow", "--pitfall 'slow' is not one of");
  expect_usage_error(kOk + "--pitfall no-average", "--pitfall no-average applies to --mode ddp only");
  expect_usage_error(
      kOk + "--backend mpi",
      is_backend_registered("mpi")
          ? std::string("--backend mpi runs each rank as a process on its CPU, started by mpirun "
                        "-np N: use --mode ddp --device cpu")
          : fmt::format("--backend mpi is not built in this version (built: {})", built_backend_words()));
  expect_usage_error(kOk + "--backend gloo", "--backend 'gloo' is not one of sim, cuda, nccl, mpi");
  expect_usage_error(kOk + "--loss hinge", "--loss 'hinge' is not one of ce, mse");
  expect_usage_error(kOk + "--optim lion", "--optim 'lion' is not one of sgd, adam, adamw");
  expect_usage_error(kOk + "--lr -1", "--lr must be >= 0, got -1");
  expect_usage_error("train --dataset spirals:64 --model 2-8-3 --batch 0",
                     "--batch must be at least 1, got 0");
  expect_usage_error(kOk + "--epochs 2", "give either --steps or --epochs, not both");
  expect_usage_error(kOk + "--devices 2", "--mode single trains on one device, but --devices is 2");
  expect_usage_error(kOk + "--optim adam --momentum 0.9", "--momentum applies to --optim sgd only");
  expect_usage_error("train --model 2-8-3", "no data: give --data x.npy,y.npy or --dataset NAME:N");
  expect_usage_error(kOk + "--data a.npy,b.npy", "give either --data or --dataset, not both");
  expect_usage_error("train --data onlyone.npy --model 2-8-3", "--data 'onlyone.npy' must be two files");
  expect_usage_error(kOk + "--preset b200", "unknown preset 'b200'");
  expect_usage_error("train --dataset spirals:64 --model 2-x-3", "2-x-3");
  expect_usage_error("train --dataset moons:64 --model 2-8-3", "moons");
}

// A launcher (dpscope launch, torchrun) starts one copy of the command per rank with RANK and
// WORLD_SIZE set: only ranks that are processes (nccl) may run so; every other mode would run the
// whole run N times over the same outputs, and says so in one line.
TEST(TrainCli, UnderALauncherOnlyProcessRanksRun) {
  auto as_rank = [](const std::string& env, const std::string& args) {
    return testing::run_command(env + " " + DPSCOPE_CLI + " " + args);
  };
  for (const std::string& args : {kOk, kOk + "--mode dp --devices 2 ", kOk + "--mode ddp --devices 2 "}) {
    const auto r = as_rank("RANK=1 WORLD_SIZE=2", args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find("this process is rank 1 of 2 (RANK and WORLD_SIZE are set, as dpscope launch and "
                            "torchrun do)"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("runs the whole run in one process: use --mode ddp --device cuda --backend nccl"),
              std::string::npos)
        << r.output;
  }
  // A world of one process is an ordinary run.
  EXPECT_EQ(as_rank("RANK=0 WORLD_SIZE=1", kOk).exit_code, 0);
  // Malformed launcher variables are named.
  const auto bad = as_rank("RANK=2 WORLD_SIZE=2", kOk + "--mode ddp --devices 2 ");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("RANK=2 must be below WORLD_SIZE=2"), std::string::npos) << bad.output;
}

TEST(TrainCli, MissingAndMismatchedFiles) {
  TempDir dir("train_files");
  expect_usage_error("train --model 2-8-3 --data " + (dir / "nope.npy") + "," + (dir / "y.npy"), "nope.npy");
  expect_usage_error(kOk + "--init " + (dir / "missing.safetensors"), "missing.safetensors");
  expect_usage_error(kOk + "--trace " + (dir / "no/such/dir/t.jsonl"),
                     "t.jsonl: cannot write there: directory");

  // Data that does not fit the model or the loss.
  const std::vector<float> x(10 * 3, 0.5f);
  const std::vector<int64_t> classes = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
  const std::vector<float> values(10, 1.0f);
  save_npy(dir / "x.npy", Tensor::from_floats(x, {10, 3}));
  save_npy(dir / "c.npy", Tensor::from_ints(classes, {10}));
  save_npy(dir / "v.npy", Tensor::from_floats(values, {10}));
  const std::string xc = " --data " + (dir / "x.npy") + "," + (dir / "c.npy");
  const std::string xv = " --data " + (dir / "x.npy") + "," + (dir / "v.npy");
  expect_usage_error("train --model 4-8-5" + xc,
                     "inputs have 3 features per sample but --model 4-8-5 expects 4");
  expect_usage_error("train --model 3-8-4" + xc, "targets have 5 classes but --model 3-8-4 has 4 outputs");
  expect_usage_error("train --model 3-8-1 --loss ce" + xv, "--loss ce needs int64 class targets");
  expect_usage_error("train --model 3-8-5 --loss mse" + xc, "--loss mse needs float32 targets");
  expect_usage_error("train --model 3-8-2 --loss mse" + xv,
                     "targets have 1 values per sample but --model 3-8-2 has 2");
  EXPECT_EQ(run_dpscope("train --model 3-8-1 --loss mse --steps 1" + xv).exit_code, 0);

  // Weights saved for one model, loaded into another.
  ASSERT_EQ(run_dpscope("train --model 3-8-5 --steps 1 --save " + (dir / "w.safetensors") + xc).exit_code, 0);
  expect_usage_error("train --model 3-16-5 --steps 1 --init " + (dir / "w.safetensors") + xc,
                     "does not fit --model 3-16-5: load_state_dict: size mismatch for 0.weight");

  std::ofstream(dir / "junk.safetensors") << "not a safetensors file";
  expect_usage_error("train --model 3-8-5 --steps 1 --init " + (dir / "junk.safetensors") + xc,
                     "junk.safetensors");
}

}  // namespace
}  // namespace dpscope
