// Hostile-input rows, training runs: memory estimates, values in files and flags, checkpoint
// names.
//
// Each row is a defect found in a hostile-input review (or a neighbour of one) seen from the command line;
// the unit tests beside the behaviour
// (tests/runtime/train/{memory_estimate,train_values,checkpoint}_test.cpp) pin the exact messages. Write
// failures run `dpscope` under `ulimit -f` (a file-size limit makes a write fail with EFBIG as a full disk
// does with ENOSPC), from a two-line shell script.
#include <sys/stat.h>

#include <cmath>
#include <limits>

#include "cli/hostile_input.hpp"
#include "dpscope/io/npy.hpp"
#include "dpscope/io/safetensors.hpp"

namespace dpscope::testing {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// x.npy [4, 2] with NaN at [2, 1], y.npy four int64 classes.
void write_data_with_nan(const fs::path& dir) {
  const float x[] = {0.f, 1.f, 1.f, 0.f, 0.5f, kNan, -1.f, 1.f};
  save_npy(dir / "x.npy", Tensor::from_floats(x, {4, 2}));
  const int64_t y[] = {0, 1, 2, 1};
  save_npy(dir / "y.npy", Tensor::from_ints(y, {4}));
}

// Initial weights for 2-8-3 with +inf at 0.bias[5].
void write_init_with_inf(const fs::path& dir) {
  Tensor bias = Tensor::zeros({8});
  bias.f32()[5] = std::numeric_limits<float>::infinity();
  save_safetensors(dir / "init.safetensors", {{"0.weight", Tensor::zeros({8, 2})},
                                              {"0.bias", bias},
                                              {"2.weight", Tensor::zeros({3, 8})},
                                              {"2.bias", Tensor::zeros({3})}});
}

// {dir}/run.sh: `dpscope <args>` with writes past 512 bytes failing (EFBIG, SIGXFSZ ignored).
std::function<void(const fs::path&, const Fixtures&)> under_file_size_limit(const std::string& args) {
  return [args](const fs::path& dir, const Fixtures&) {
    write_file(dir / "run.sh", "trap '' XFSZ\nulimit -f 1\nexec " + std::string(DPSCOPE_CLI) + " " +
                                   replace_all(args, "{dir}", dir.string()) + "\n");
  };
}

void copy_checkpoints(const fs::path& dir, const Fixtures& fx) { fs::copy(fx.checkpoints, dir / "ckpt"); }

fs::path checkpoint(const fs::path& dir, int step) {
  return dir / "ckpt" / fmt::format("checkpoint-{:08}.safetensors", step);
}

// A model whose weights (12 KiB) do not fit under the file-size limit.
const std::string kBigger = "train --dataset spirals:64 --model 2-512-3 --batch 16 --seed 1";
const std::string kResume = kTrain + " --steps 4 --checkpoint-every 1 --resume --checkpoint-dir {dir}/ckpt";

}  // namespace

std::vector<Case> hostile_training_cases() {
  return {
      // ---- sizes: the memory a run needs, estimated before anything is allocated ----
      {"ModelTooBigForTheSimulatedGpu",
       "train --dataset spirals:64 --model 2-2147483648-3 --batch 16 --steps 1", 2,
       "--model 2-2147483648-3 needs about 352.00 GiB on sim:0 (NVIDIA H100 SXM5 80GB)"},
      {"ModelTooBigForThisMachine",
       "train --device cpu --dataset spirals:64 --model 2-1000000000000-3 --batch 16 --steps 1", 2,
       "of host memory for the cpu device"},
      {"ModelSizeOverflows", "train --dataset spirals:64 --model 2-4294967296-4294967296-3 --steps 1", 2,
       "4294967296 * 4294967296 overflows a 64-bit integer"},
      {"TimingOnlyModelBeyondThisMachine",  // 6 GiB a GPU, 6 TiB for the world: only the GPU counts
       "train --mode ddp --timing-only --devices 1024 --model 16384-16384-16384-1 --batch 16 --steps 1", 0,
       ""},
      {"TimingOnlyModelBeyondTheGpu",
       "train --mode ddp --timing-only --devices 8 --model 65536-65536-65536-1 --batch 16 --steps 1", 2,
       "which holds 74.51 GiB"},

      // ---- values: float flags, and NaN or inf in the files a run reads ----
      {"LearningRateOverflowsToInf", kTrain + " --steps 2 --lr 1e309", 2,
       "--lr must be a finite number, got inf"},
      {"MomentumNotANumber", kTrain + " --steps 2 --momentum nan", 2,
       "--momentum must be a finite number, got nan"},
      {"MomentumAboveOne", kTrain + " --steps 2 --momentum 2", 2, "--momentum must be <= 1, got 2"},
      {"WeightDecayInfinite", kTrain + " --steps 2 --weight-decay inf", 2,
       "--weight-decay must be a finite number, got inf"},
      {"BucketSizeInfinite", kTrain + " --steps 2 --mode ddp --devices 2 --bucket-mb inf", 2,
       "--bucket-mb must be a finite number, got inf"},
      {"DataHoldsNan", "train --data {dir}/x.npy,{dir}/y.npy --model 2-8-3 --batch 4 --steps 1", 2,
       "x.npy: value [2, 1] is nan; inputs must be finite numbers",
       [](const fs::path& d, const Fixtures&) { write_data_with_nan(d); }},
      {"InitHoldsInf", kTrain + " --steps 1 --init {dir}/init.safetensors", 2,
       "init.safetensors: tensor '0.bias' holds inf at [5]; weights must be finite numbers",
       [](const fs::path& d, const Fixtures&) { write_init_with_inf(d); }},
      {"InitIsAFifo", kTrain + " --steps 1 --init {dir}/fifo.safetensors", 2,
       "fifo.safetensors: is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { ::mkfifo((d / "fifo.safetensors").c_str(), 0600); }},

      // ---- checkpoints: names that disagree with their contents, files that are not files ----
      {"ResumeIgnoresARenamedCheckpoint",
       kResume,
       0,
       "",
       [](const fs::path& d, const Fixtures& fx) {
         copy_checkpoints(d, fx);
         fs::rename(checkpoint(d, 2), checkpoint(d, 99));  // holds step 2: resumed from 1 instead
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures&) {
         EXPECT_TRUE(fs::exists(checkpoint(d, 99))) << "never deleted";
         EXPECT_TRUE(fs::exists(checkpoint(d, 3))) << "the renamed file is not counted in rotation";
         EXPECT_TRUE(fs::exists(checkpoint(d, 4)));
         EXPECT_FALSE(fs::exists(checkpoint(d, 1)));
       }},
      {"ResumePassesOverAFifo",
       kResume,
       0,
       "",
       [](const fs::path& d, const Fixtures& fx) {
         copy_checkpoints(d, fx);
         ::mkfifo(checkpoint(d, 10).c_str(), 0600);  // opening it would block until a writer came
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures&) {
         EXPECT_TRUE(fs::is_fifo(checkpoint(d, 10)));
         EXPECT_TRUE(fs::exists(checkpoint(d, 4)));
       }},
      {"ResumeFromADirectory", kResume, 2, "checkpoint-00000003.safetensors: is a directory",
       [](const fs::path& d, const Fixtures&) { fs::create_directories(checkpoint(d, 3)); }},
      {"ResumeFromASymlinkToDevZero", kResume, 2,
       "checkpoint-00000003.safetensors: is a character device, not a regular file",
       [](const fs::path& d, const Fixtures&) {
         fs::create_directories(d / "ckpt");
         fs::create_symlink("/dev/zero", checkpoint(d, 3));
       }},
      {"ResumeThroughASymlinkLoop", kResume, 2,
       "checkpoint-00000003.safetensors: too many levels of symbolic links",
       [](const fs::path& d, const Fixtures&) {
         fs::create_directories(d / "ckpt");
         fs::create_symlink(d / "ckpt" / "other", checkpoint(d, 3));
         fs::create_symlink(checkpoint(d, 3), d / "ckpt" / "other");
       }},

      // ---- writes that fail once the run has started: runtime failures (1) with the reason ----
      {"SaveFails",
       "{dir}/run.sh",
       1,
       "w.safetensors: write failed after ",
       under_file_size_limit(kBigger + " --steps 1 --save {dir}/w.safetensors"),
       {},
       {},
       "/bin/sh"},
      {"TraceFails",
       "{dir}/run.sh",
       1,
       "t.jsonl': File too large",
       under_file_size_limit(kTrain + " --steps 4 --trace {dir}/t.jsonl"),
       {},
       {},
       "/bin/sh"},
      {"CheckpointFails",
       "{dir}/run.sh",
       1,
       "cannot write checkpoint ",
       under_file_size_limit(kBigger + " --steps 2 --checkpoint-dir {dir}/ck"),
       {},
       {},
       "/bin/sh"},
  };
}

}  // namespace dpscope::testing
