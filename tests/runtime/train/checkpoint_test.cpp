// Checkpoints: bit-identical resume, refusal of damaged files, the newest two kept, config checks;
// and the library API underneath: run ownership, a checksum over metadata too, fallback to the newest
// valid checkpoint, stale temporary files swept, resume positions checked.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <limits>

#include "dpscope/io/checkpoint.hpp"
#include "dpscope/io/safetensors.hpp"
#include "support/cli.hpp"
#include "support/errors.hpp"
#include "support/file_size_limit.hpp"

namespace dpscope {
namespace {

using testing::run_dpscope;
using testing::TempDir;
using testing::what_of;
namespace fs = std::filesystem;

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

// Defect 8: a corrupt newest checkpoint is never loaded; resume falls back to the previous valid one
// with one warning line naming both, and the damaged file is left for the user to look at.
TEST(Checkpoint, CorruptedNewestCheckpointFallsBackToThePreviousWithOneWarning) {
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
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t warning = r.output.find("dpscope: warning: ");
  ASSERT_NE(warning, std::string::npos) << r.output;
  const std::string line = r.output.substr(warning, r.output.find('\n', warning) - warning);
  EXPECT_NE(line.find("checkpoint-00000008.safetensors"), std::string::npos) << line;
  EXPECT_NE(line.find("checksum"), std::string::npos) << line;
  EXPECT_NE(line.find("checkpoint-00000004.safetensors"), std::string::npos) << line;
  EXPECT_EQ(r.output.find("dpscope: warning: ", warning + 1), std::string::npos) << "one warning only";
  EXPECT_NE(r.output.find("resumed after step 4"), std::string::npos) << r.output;
  // The resumed run wrote step 12; the damaged file is left for the user to look at, never deleted
  // or loaded.
  EXPECT_NO_THROW(load_checkpoint(dir / "checkpoint-00000012.safetensors"));
  EXPECT_THROW(load_checkpoint(newest), Error);

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

// A small state as a run would save it after `steps` steps with 4 batches per epoch.
CheckpointState state_of(const std::string& run_id, int64_t steps) {
  CheckpointState s;
  s.run_id = run_id;
  s.steps_done = steps;
  s.epoch = steps / 4;
  s.batch_in_epoch = steps % 4;
  s.config_json = R"({"mode":"single","lr":0.01})";
  const float w[] = {1.5f, -2.0f, static_cast<float>(steps)};
  s.model = {{"0.weight", Tensor::from_floats(w, {1, 3})}};
  const int64_t t[] = {steps};
  s.optimizer = {{"0.weight.step", Tensor::from_ints(t, {1})}};
  return s;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Flips bit `bit` of the first byte after `marker` in `file` (the marker must occur).
void flip_bit_after(const fs::path& file, const std::string& marker, int bit) {
  std::string bytes = read_bytes(file);
  const size_t at = bytes.find(marker);
  ASSERT_NE(at, std::string::npos) << marker << " not in " << file;
  bytes[at + marker.size()] = static_cast<char>(bytes[at + marker.size()] ^ (1 << bit));
  write_bytes(file, bytes);
}

TEST(CheckpointApi, RoundTripsRunIdPositionConfigAndTensors) {
  TempDir dir("ckpt_api_roundtrip");
  const fs::path file = save_checkpoint(dir.path(), state_of("run-a", 6));
  EXPECT_EQ(file, dir.path() / "checkpoint-00000006.safetensors");
  const CheckpointState s = load_checkpoint(file);
  EXPECT_EQ(s.run_id, "run-a");
  EXPECT_EQ(s.steps_done, 6);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.batch_in_epoch, 2);
  EXPECT_EQ(s.config_json, R"({"mode":"single","lr":0.01})");
  ASSERT_EQ(s.model.size(), 1u);
  EXPECT_EQ(s.model[0].first, "0.weight");
  EXPECT_EQ(s.model[0].second.f32()[2], 6.0f);
  ASSERT_EQ(s.optimizer.size(), 1u);
  EXPECT_EQ(s.optimizer[0].second.i64()[0], 6);
  EXPECT_EQ(read_safetensors_metadata(file).at("format"), "dpscope-checkpoint-2");
}

TEST(CheckpointApi, NewRunIdsDiffer) {
  const std::string a = new_run_id();
  const std::string b = new_run_id();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

// Defect 2: a fresh run deleted its own checkpoint-00000015 right after writing it because a stale
// checkpoint-00000030 of an earlier run had a higher step number.
TEST(CheckpointApi, AFreshRunRefusesADirectoryHoldingAnotherRunsCheckpoints) {
  TempDir dir("ckpt_api_owner");
  save_checkpoint(dir.path(), state_of("old-run", 30));
  EXPECT_EQ(what_of([&] { check_fresh_checkpoint_dir(dir.path()); }),
            "--checkpoint-dir " + dir.path().string() +
                " already holds checkpoints of another run (newest: checkpoint-00000030.safetensors, run "
                "old-run); continue that run with --resume or choose another directory");
  EXPECT_EQ(what_of([&] { save_checkpoint(dir.path(), state_of("new-run", 15)); }),
            "checkpoint directory " + dir.path().string() +
                " holds checkpoint-00000030.safetensors of another run (run old-run, this run is new-run); "
                "continue that run with --resume or choose another directory");
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000015.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000030.safetensors"));

  TempDir empty("ckpt_api_fresh");
  EXPECT_NO_THROW(check_fresh_checkpoint_dir(empty.path() / "made" / "here"));
  EXPECT_TRUE(fs::is_directory(empty.path() / "made" / "here"));
  EXPECT_TRUE(fs::is_empty(empty.path() / "made" / "here"));  // the write probe is gone
  write_bytes(empty.path() / "a-file", "x");
  EXPECT_EQ(
      what_of([&] { check_fresh_checkpoint_dir(empty.path() / "a-file"); }).rfind("--checkpoint-dir ", 0),
      0u);
}

TEST(CheckpointApi, KeepsThisRunsNewestTwoAndNeverTouchesDamagedFiles) {
  TempDir dir("ckpt_api_keep");
  for (int64_t step : {4, 8, 12}) save_checkpoint(dir.path(), state_of("r", step));
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000004.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000008.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000012.safetensors"));
  // A damaged file (its run cannot be read) is left for the user, not rotated away.
  write_bytes(dir / "checkpoint-00000099.safetensors", "garbage");
  save_checkpoint(dir.path(), state_of("r", 16));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000099.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000008.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000012.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000016.safetensors"));
  // The file just written is always kept, even when the run holds one with more steps.
  save_checkpoint(dir.path(), state_of("r", 2), 1);
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000002.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000016.safetensors"));
}

// Defect 5: the checksum covered only the tensors, so an edited epoch resumed at the wrong place.
TEST(CheckpointApi, ChecksumCoversTheMetadata) {
  TempDir dir("ckpt_api_meta");
  const fs::path file = save_checkpoint(dir.path(), state_of("r", 1));  // epoch 0, batch 1
  flip_bit_after(file, R"("epoch":")", 0);                              // "0" -> "1"
  const std::string message = what_of([&] { load_checkpoint(file); });
  EXPECT_EQ(message.rfind("checkpoint " + file.string() + " is corrupted: checksum fnv1a64:", 0), 0u)
      << message;

  const fs::path again = save_checkpoint(dir.path(), state_of("r", 5));
  flip_bit_after(again, R"("run_id":")", 1);  // "r" -> "p"
  EXPECT_NE(what_of([&] { load_checkpoint(again); }).find("is corrupted: checksum"), std::string::npos);
}

TEST(CheckpointApi, ChecksumCoversTensorShapes) {
  CheckpointState s = state_of("r", 1);
  NamedTensors tensors = {{"model.0.weight", s.model[0].second}};
  const SafetensorsMetadata meta = {{"format", "dpscope-checkpoint-2"}};
  const std::string as_row = checkpoint_checksum(meta, tensors);
  tensors[0].second = s.model[0].second.reshape({3, 1});  // same bytes, another shape
  EXPECT_NE(checkpoint_checksum(meta, tensors), as_row);
  EXPECT_EQ(as_row.rfind("fnv1a64:", 0), 0u);
  EXPECT_EQ(as_row.size(), 8u + 16u);
}

TEST(CheckpointApi, RefusesVersionOneCheckpointsClearly) {
  TempDir dir("ckpt_api_v1");
  const fs::path file = dir.path() / "checkpoint-00000001.safetensors";
  save_safetensors(file, {{"model.w", Tensor::zeros({2})}}, {{"format", "dpscope-checkpoint-1"}});
  EXPECT_EQ(what_of([&] { load_checkpoint(file); }),
            "checkpoint " + file.string() +
                ": written by an older dpscope (format 'dpscope-checkpoint-1') whose checksum does not cover "
                "its metadata; start a fresh run");
}

// Defect 8: a corrupt newest checkpoint made --resume refuse without mentioning the previous one.
TEST(CheckpointApi, ResumeFallsBackToTheNewestValidCheckpointWithOneWarning) {
  TempDir dir("ckpt_api_fallback");
  save_checkpoint(dir.path(), state_of("r", 4));
  save_checkpoint(dir.path(), state_of("r", 8));
  const ResumeCheckpoint clean = load_newest_valid_checkpoint(dir.path());
  EXPECT_EQ(clean.state.steps_done, 8);
  EXPECT_EQ(clean.warning, "");

  const fs::path newest = dir.path() / "checkpoint-00000008.safetensors";
  const fs::path previous = dir.path() / "checkpoint-00000004.safetensors";
  flip_bit_after(newest, R"("steps_done":")", 2);
  const ResumeCheckpoint taken = load_newest_valid_checkpoint(dir.path());
  EXPECT_EQ(taken.file, previous);
  EXPECT_EQ(taken.state.steps_done, 4);
  EXPECT_EQ(taken.warning.find('\n'), std::string::npos);
  EXPECT_EQ(taken.warning.rfind("checkpoint " + newest.string() + " is corrupted: checksum", 0), 0u)
      << taken.warning;
  const std::string tail = "; resuming from " + previous.string() + " instead, the newest valid checkpoint";
  ASSERT_GE(taken.warning.size(), tail.size());
  EXPECT_EQ(taken.warning.substr(taken.warning.size() - tail.size()), tail);

  fs::resize_file(previous, 20);  // now every checkpoint is damaged
  const std::string message = what_of([&] { load_newest_valid_checkpoint(dir.path()); });
  EXPECT_EQ(message.rfind("checkpoint " + newest.string() + " is corrupted", 0), 0u) << message;
  const std::string none = "; no older checkpoint in " + dir.path().string() + " is valid";
  EXPECT_EQ(message.substr(message.size() - none.size()), none) << message;

  TempDir empty("ckpt_api_none");
  EXPECT_EQ(what_of([&] { load_newest_valid_checkpoint(empty.path()); }),
            "--resume: no checkpoint in '" + empty.path().string() + "'");
}

TEST(CheckpointApi, ResumePositionMustFitTheRun) {
  const CheckpointState s = state_of("r", 30);  // epoch 7, batch 2 at 4 batches per epoch
  EXPECT_NO_THROW(check_resume_position(s, "c.safetensors", 30, 4));
  EXPECT_NO_THROW(check_resume_position(s, "c.safetensors", 100, 4));
  EXPECT_EQ(what_of([&] { check_resume_position(s, "c.safetensors", 15, 4); }),
            "--resume: c.safetensors is after step 30, past the end of this run (15 steps); ask for at least "
            "30 steps");
  EXPECT_EQ(
      what_of([&] { check_resume_position(s, "c.safetensors", 30, 5); }),
      "checkpoint c.safetensors: its position (epoch 7, batch 2) does not follow from 30 steps done at 5 "
      "batches per epoch");
  CheckpointState edited = s;
  edited.epoch = 0;
  EXPECT_NE(what_of([&] { check_resume_position(edited, "c.safetensors", 30, 4); }).find("does not follow"),
            std::string::npos);
  edited = s;
  edited.epoch = INT64_MAX / 2;  // epoch * batches overflows: refused, not wrapped
  EXPECT_EQ(what_of([&] { check_resume_position(edited, "c.safetensors", 30, 4); }),
            "checkpoint epoch * batches: 4611686018427387903 * 4 overflows a 64-bit integer");
}

TEST(CheckpointApi, SaveRemovesTemporaryFilesOfDeadWriters) {
  TempDir dir("ckpt_api_tmp");
  // pid 99999999 is above Linux's pid_max (4194304): no such process can exist. pid 1 always does.
  const fs::path dead = dir.path() / "checkpoint-00000003.safetensors.tmp.99999999.0";
  const fs::path alive = dir.path() / "checkpoint-00000003.safetensors.tmp.1.0";
  const fs::path unrelated = dir.path() / "notes.txt.tmp.99999999.0";
  for (const fs::path& f : {dead, alive, unrelated}) write_bytes(f, "partial");
  save_checkpoint(dir.path(), state_of("r", 4));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(unrelated));
}

// Regression test: checkpoint-00000006 renamed to checkpoint-00000099 was resumed from as the newest, by
// `--steps 8` and `--steps 10` alike, and kept by the rotation while it deleted the real
// checkpoint-00000008. A name must agree with the step inside, or the file is ignored: one warning,
// never resumed from, never counted in rotation, never deleted.
TEST(CheckpointApi, ARenamedCheckpointIsIgnoredNeverResumedFromNorRotated) {
  TempDir dir("ckpt_api_renamed");
  save_checkpoint(dir.path(), state_of("r", 4));
  save_checkpoint(dir.path(), state_of("r", 6));
  const fs::path renamed = dir.path() / "checkpoint-00000099.safetensors";
  fs::rename(dir.path() / "checkpoint-00000006.safetensors", renamed);

  const testing::Outcome direct = testing::error_of([&] { load_checkpoint(renamed); });
  EXPECT_EQ(direct.kind, ErrorKind::kFormat);
  EXPECT_EQ(direct.message,
            "checkpoint " + renamed.string() +
                ": its name says step 99 but it holds the state after step 6 (renamed?); it is "
                "ignored");
  const ResumeCheckpoint taken = load_newest_valid_checkpoint(dir.path());
  EXPECT_EQ(taken.state.steps_done, 4);
  EXPECT_EQ(taken.warning, direct.message + "; resuming from " +
                               (dir.path() / "checkpoint-00000004.safetensors").string() +
                               " instead, the newest valid checkpoint");

  for (int64_t step : {8, 10}) save_checkpoint(dir.path(), state_of("r", step));
  EXPECT_TRUE(fs::exists(renamed)) << "never deleted";
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000008.safetensors")) << "the renamed file is not counted";
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000010.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000004.safetensors"));
  EXPECT_EQ(load_newest_valid_checkpoint(dir.path()).state.steps_done, 10);
}

// Regression test: a directory, a symlink to /dev/zero and a symlink loop all said "no such file".
TEST(CheckpointApi, AFileThatIsNotARegularFileIsNamedForWhatItIs) {
  TempDir dir("ckpt_api_kinds");
  const fs::path directory = dir.path() / "checkpoint-00000001.safetensors";
  fs::create_directory(directory);
  const fs::path zero = dir.path() / "checkpoint-00000002.safetensors";
  fs::create_symlink("/dev/zero", zero);
  const fs::path loop = dir.path() / "checkpoint-00000003.safetensors";
  fs::create_symlink(dir.path() / "loop-b", loop);
  fs::create_symlink(loop, dir.path() / "loop-b");
  const fs::path dangling = dir.path() / "checkpoint-00000004.safetensors";
  fs::create_symlink(dir.path() / "gone", dangling);
  const fs::path missing = dir.path() / "checkpoint-00000005.safetensors";

  const auto refused = [](const fs::path& file, const std::string& reason) {
    const testing::Outcome o = testing::error_of([&] { load_checkpoint(file); });
    EXPECT_EQ(o.kind, ErrorKind::kIo) << o.message;
    EXPECT_EQ(o.message, "checkpoint " + file.string() + ": " + reason);
  };
  refused(directory, "is a directory");
  refused(zero, "is a character device, not a regular file");
  refused(loop, "too many levels of symbolic links");
  refused(dangling, "is a symbolic link to a missing file");
  refused(missing, "no such file");
  // --resume passes over each with the reason, and the rotation never touches them.
  const std::string message = what_of([&] { load_newest_valid_checkpoint(dir.path()); });
  EXPECT_EQ(message, "checkpoint " + dangling.string() +
                         ": is a symbolic link to a missing file; no older checkpoint in " +
                         dir.path().string() + " is valid");
  save_checkpoint(dir.path(), state_of("r", 8), 1);
  for (const fs::path& f : {directory, zero, loop, dangling})
    EXPECT_TRUE(fs::exists(fs::symlink_status(f))) << f;
}

// Regression test: a FIFO named checkpoint-00000010.safetensors blocked --resume forever (opening a FIFO
// waits for a writer). Its type is checked first: it is passed over with a warning, never opened.
TEST(CheckpointApi, AFifoInTheDirectoryIsNeverOpened) {
  TempDir dir("ckpt_api_fifo");
  save_checkpoint(dir.path(), state_of("r", 4));
  save_checkpoint(dir.path(), state_of("r", 8));
  const fs::path fifo = dir.path() / "checkpoint-00000010.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const ResumeCheckpoint taken = load_newest_valid_checkpoint(dir.path());
  EXPECT_EQ(taken.state.steps_done, 8);
  EXPECT_EQ(taken.warning.rfind("checkpoint " + fifo.string() +
                                    ": is a FIFO (named pipe), not a regular file; "
                                    "resuming from ",
                                0),
            0u)
      << taken.warning;
  save_checkpoint(dir.path(), state_of("r", 12));  // the rotation reads every file's run id
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000004.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "checkpoint-00000008.safetensors"));
  // A fresh run is refused there without opening it either.
  EXPECT_NE(what_of([&] { check_fresh_checkpoint_dir(dir.path()); }).find("already holds checkpoints"),
            std::string::npos);
}

// Regression test, a neighbour of those defects: a checkpoint whose checksum verifies but whose values a run
// cannot continue from — NaN or inf in the weights or the optimizer state, a negative second moment, a
// fractional step count — is refused like a damaged one, naming the tensor and the index.
TEST(CheckpointApi, ValuesARunCannotContinueFromAreRefused) {
  TempDir dir("ckpt_api_values");
  CheckpointState s = state_of("r", 4);
  const float w[] = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  s.model = {{"0.weight", Tensor::from_floats(w, {1, 3})}};
  const fs::path nan_file = save_checkpoint(dir.path(), s);
  const testing::Outcome nan = testing::error_of([&] { load_checkpoint(nan_file); });
  EXPECT_EQ(nan.kind, ErrorKind::kFormat);
  EXPECT_EQ(nan.message,
            "checkpoint " + nan_file.string() +
                ": tensor 'model.0.weight' holds nan at [0, 1]; a checkpoint holds finite numbers only");

  s = state_of("r", 5);
  const float moment[] = {0.5f, -0.25f, 1.0f};
  s.optimizer = {{"0.weight.exp_avg_sq", Tensor::from_floats(moment, {1, 3})}};
  const fs::path negative = save_checkpoint(dir.path(), s);
  EXPECT_EQ(
      what_of([&] { load_checkpoint(negative); }),
      "checkpoint " + negative.string() +
          ": optimizer state 'optim.0.weight.exp_avg_sq' holds -0.25 at index 1; a second moment is >= 0");

  s = state_of("r", 6);
  const float step[] = {2.5f};
  s.optimizer = {{"0.weight.step", Tensor::from_floats(step, {})}};
  const fs::path fractional = save_checkpoint(dir.path(), s);
  EXPECT_NE(what_of([&] { load_checkpoint(fractional); }).find("a step count is a whole number >= 0"),
            std::string::npos);
}

// Regression test: a full disk while writing a checkpoint exited with code 2, as if the user had erred. It
// is a runtime failure (kWriteFailed, exit code 1) with the system's reason. RLIMIT_FSIZE makes the
// write fail (EFBIG) without a full disk.
TEST(CheckpointApi, AFailedWriteIsAWriteFailureWithTheSystemsReason) {
  TempDir dir("ckpt_api_full");
  CheckpointState s = state_of("r", 4);
  s.model = {{"0.weight", Tensor::zeros({64, 1024})}};  // 256 KiB
  const testing::Outcome o = [&] {
    const dpscope::testing::FileSizeLimit limit(4096);
    return testing::error_of([&] { save_checkpoint(dir.path(), s); });
  }();
  EXPECT_EQ(o.kind, ErrorKind::kWriteFailed) << o.message;
  EXPECT_FALSE(Error(o.kind, "").is_usage_error());
  EXPECT_EQ(o.message.rfind(
                "cannot write checkpoint " + (dir.path() / "checkpoint-00000004.safetensors").string(), 0),
            0u)
      << o.message;
  EXPECT_NE(o.message.find("File too large"), std::string::npos) << o.message;
  EXPECT_FALSE(fs::exists(dir / "checkpoint-00000004.safetensors"));
}

}  // namespace
}  // namespace dpscope
