// Checkpoints: bit-identical resume, refusal of damaged files, the newest two kept, config checks.
#include <gtest/gtest.h>

#include <fstream>

#include "dpscope/io/safetensors.hpp"
#include "dpscope/train/checkpoint.hpp"
#include "runtime/train/cli_support.hpp"

namespace dpscope {
namespace {

using testing::run_dpscope;
using testing::TempDir;

const std::string kRun =
    "train --dataset spirals:100 --model 2-16-3 --batch 16 --optim adam --lr 0.01 --seed 3 ";  // 7
                                                                                               // batches/epoch

bool bitwise_equal(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape()) return false;
    if (std::memcmp(a[i].second.f32(), b[i].second.f32(), a[i].second.nbytes()) != 0) return false;
  }
  return true;
}

TEST(Checkpoint, ResumedRunEndsBitIdenticalToAnUninterruptedOne) {
  TempDir dir("ckpt_resume");
  ASSERT_EQ(run_dpscope(kRun + "--steps 17 --save " + (dir / "straight.safetensors")).exit_code, 0);
  // Interrupted after 10 steps (mid-epoch 1), then continued to 17.
  const auto first =
      run_dpscope(kRun + "--steps 10 --checkpoint-dir " + (dir / "ckpt") + " --checkpoint-every 5");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_dpscope(kRun + "--steps 17 --checkpoint-dir " + (dir / "ckpt") +
                                  " --resume --save " + (dir / "resumed.safetensors"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed after step 10"), std::string::npos) << second.output;
  EXPECT_TRUE(bitwise_equal(load_safetensors(dir / "straight.safetensors"),
                            load_safetensors(dir / "resumed.safetensors")));
}

TEST(Checkpoint, KeepsTheNewestTwo) {
  TempDir dir("ckpt_keep");
  ASSERT_EQ(
      run_dpscope(kRun + "--steps 12 --checkpoint-every 3 --checkpoint-dir " + dir.path().string()).exit_code,
      0);
  EXPECT_FALSE(std::filesystem::exists(dir / "checkpoint-00000006.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint-00000009.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint-00000012.safetensors"));
  EXPECT_EQ(latest_checkpoint(dir.path()), dir.path() / "checkpoint-00000012.safetensors");
  const CheckpointState s = load_checkpoint(dir / "checkpoint-00000012.safetensors");
  EXPECT_EQ(s.steps_done, 12);
  EXPECT_EQ(s.epoch, 1);  // 7 batches per epoch: step 12 is batch 5 of epoch 1
  EXPECT_EQ(s.batch_in_epoch, 5);
  EXPECT_EQ(s.model.size(), 4u);
  EXPECT_EQ(s.model[0].first, "0.weight");
  EXPECT_FALSE(s.optimizer.empty());
}

TEST(Checkpoint, CorruptedCheckpointIsRefusedAndThePreviousOneKept) {
  TempDir dir("ckpt_corrupt");
  ASSERT_EQ(
      run_dpscope(kRun + "--steps 8 --checkpoint-every 4 --checkpoint-dir " + dir.path().string()).exit_code,
      0);
  const std::string newest = dir / "checkpoint-00000008.safetensors";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');  // one flipped byte in the last tensor
  }
  const auto r = run_dpscope(kRun + "--steps 12 --resume --checkpoint-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("checkpoint-00000008.safetensors is corrupted: checksum"), std::string::npos)
      << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint-00000004.safetensors"));
  EXPECT_NO_THROW(load_checkpoint(dir / "checkpoint-00000004.safetensors"));

  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) / 2);  // truncated
  try {
    load_checkpoint(newest);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is damaged"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, ResumeChecksTheConfiguration) {
  TempDir dir("ckpt_config");
  ASSERT_EQ(run_dpscope(kRun + "--steps 4 --checkpoint-dir " + dir.path().string()).exit_code, 0);
  const auto r = run_dpscope(
      "train --dataset spirals:100 --model 2-16-3 --batch 16 --optim adam --lr 0.02 --seed 3 "
      "--steps 8 --resume --checkpoint-dir " +
      dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("was written by a run with --lr 0.01, but this run has --lr 0.02"),
            std::string::npos)
      << r.output;
  TempDir empty("ckpt_empty");
  const auto none = run_dpscope(kRun + "--steps 2 --resume --checkpoint-dir " + empty.path().string());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("--resume: no checkpoint in"), std::string::npos) << none.output;
  EXPECT_EQ(run_dpscope(kRun + "--steps 2 --resume").exit_code, 2);
  EXPECT_EQ(run_dpscope(kRun + "--steps 2 --checkpoint-every 2").exit_code, 2);
}

TEST(Checkpoint, NotACheckpoint) {
  TempDir dir("ckpt_foreign");
  save_safetensors(dir / "checkpoint-00000001.safetensors", {{"x", Tensor::zeros({2})}});
  try {
    load_checkpoint(dir / "checkpoint-00000001.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a dpscope checkpoint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpscope
