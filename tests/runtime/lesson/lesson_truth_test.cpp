// Lessons that tell the truth, on the built `dpscope` and the shipped lessons: the
// narration follows the knobs, the handout has exercises and an answer key, and `lesson check`
// catches each defect the review found (a quoted command that fails, a picture at the wrong moment,
// two chapters at one moment, a literal number, a placeholder that does not parse).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "dpscope/lesson/lesson.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

const fs::path kLessons = fs::path(DPSCOPE_SOURCE_DIR) / "lessons";

std::string quoted(const fs::path& p) { return fmt::format("'{}'", p.string()); }

// `text` with `from` replaced by `to` once; fails the test when `from` is missing.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "missing: " << from;
  if (at == std::string::npos) return text;
  return text.substr(0, at) + to + text.substr(at + from.size());
}

// A copy of shipped lesson `id` with `from` replaced by `to`, alone in a fresh directory.
fs::path edited_lesson(const std::string& id, const std::string& from, const std::string& to) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / (id + ".toml"),
                      replaced(testing::read_file(kLessons / (id + ".toml")), from, to));
  return dir;
}

TEST(LessonTruth, NarrationFollowsTheDevicesKnob) {
  // Regression test: `lesson run 4 --knob devices=8` said "four at once".
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult r = run_cli("lesson run 4 --no-viz --knob devices=8 --out " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string listing = r.output.substr(r.output.find("== lesson 04-ddp"));
  EXPECT_NE(listing.find("torchrun starts eight copies of the same script"), std::string::npos) << listing;
  EXPECT_NE(listing.find("each learns its rank (`0` to `7`) and the world size\n  (`8`)"), std::string::npos)
      << listing;
  // Only chapter 7's comparison runs have four GPUs of their own ("DataParallel on four GPUs").
  EXPECT_EQ(listing.substr(0, listing.find("\nchapter 7 ")).find("four"), std::string::npos) << listing;
}

TEST(LessonTruth, RingNarrationCountsChunksAndStepsOfTheRun) {
  // Regression test: L5 at --knob devices=8 said "4 chunks ... N-1 = 3" while its answers said 14 steps.
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult r = run_cli("lesson run 5 --no-viz --knob devices=8 --out " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cut into eight chunks of 2 MiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("After `N-1` = seven steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("After `2(N-1)` = 14 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("answer: 14 steps"), std::string::npos) << r.output;
  // Regression test: "1.5x ... no matter how many GPUs" next to "close to 2x": the factor is the run's.
  EXPECT_NE(r.output.find("`2(N-1)/N` = 1.75\n  times the buffer"), std::string::npos) << r.output;
}

TEST(LessonTruth, StepTimesAreTheRunsAndCompareLikeForLike) {
  // Regression test: L3/L4 said "about 238 us" and "about 150 us" while the runs measured others.
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult r = run_cli("lesson run 4 --no-viz --out " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto data = trace::read_trace(dir / "04-ddp.one-gpu.trace.jsonl");
  const std::string one_gpu =
      fmt::format("{:.1f} µs", static_cast<double>(Expression::parse("span(step=1)").evaluate(data)) / 1e3);
  EXPECT_NE(r.output.find("needs " + one_gpu + " for its second step"), std::string::npos) << one_gpu << "\n"
                                                                                           << r.output;
  // The stale number, not a process id that happens to hold its digits in the scratch paths printed.
  std::string narration = r.output;
  for (size_t at = narration.find(dir.string()); at != std::string::npos; at = narration.find(dir.string()))
    narration.erase(at, dir.string().size());
  EXPECT_EQ(narration.find("238"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "04-ddp.dp.trace.jsonl"));
}

TEST(LessonTruth, HandoutForAVariantHasExercisesAndAnAnswerKey) {
  const fs::path dir = testing::scratch_dir() / "handouts";
  const testing::CliResult r = run_cli("lesson handout 5 --no-png --knob devices=6 " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = testing::read_file(dir / "05-ring-allreduce.md");
  EXPECT_NE(md.find("Each of the six GPUs holds"), std::string::npos) << md;
  EXPECT_NE(md.find("--devices 6"), std::string::npos) << md;
  EXPECT_NE(md.find("\n## Exercises\n\n"), std::string::npos) << md;
  EXPECT_NE(md.find("1. Make the ring eight GPUs long. Predict:"), std::string::npos) << md;
  EXPECT_NE(md.find("(`dpscope lesson run 05-ring-allreduce --knob devices=8`)"), std::string::npos) << md;
  const size_t key = md.find("\n## Answer key\n\n### Questions\n\n");
  ASSERT_NE(key, std::string::npos) << md;
  // The exercise's solution is computed from its own run: 2(N-1) = 14 chunks of 16 MiB / 8.
  EXPECT_NE(md.find("\n### Exercises\n\n1. 29360128 bytes — 14 steps of 2 MiB", key), std::string::npos)
      << md;
}

TEST(LessonTruth, EveryQuotedCommandMustRun) {
  // Regression test: L4 quoted `dpscope train --mode single --batch 2048 --model 512-512-512-10`, which
  // fails with "no data".
  const fs::path dir = edited_lesson(
      "04-ddp", "--dataset blobs:8192:512:10 --batch 2048 --shuffle --steps 2 --optim sgd --lr 0.01`",
      "--batch 2048`");
  const testing::CliResult r = run_cli("lesson check 04 --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("dpscope: 04-ddp: the command it quotes, `dpscope train --mode single --model "
                          "512-512-512-10 --batch 2048`, fails: "),
            std::string::npos)
      << r.output;
}

TEST(LessonTruth, APictureAtTheWrongMomentFailsItsExpectation) {
  // Regression test: L1 chapter 5, "after backward", was drawn mid-backward (20 KiB of gradients against
  // 2 MiB of parameters): its old trigger, the first memory counter of backward.
  const fs::path dir = edited_lesson("01-one-gpu", "trigger = { name = \"grad_ready\", step = 0, param = 0 }",
                                     "trigger = { name = \"memory\", phase = \"backward\", step = 0 }");
  const testing::CliResult r = run_cli("lesson check 01 --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(
      r.output.find("dpscope: 01-one-gpu: chapter 5 'Memory after backward: what the GPU holds': its "
                    "picture must show `count(name=grad_ready, step=0, at=started) == params`, but at "),
      std::string::npos)
      << r.output;
}

TEST(LessonTruth, TwoChaptersAtOneMomentAreTheSamePicture) {
  // Regression test: L8 chapter 2 (rank 1's first batch) showed the moment of chapter 1.
  const fs::path dir =
      edited_lesson("08-distributed-sampler", "trigger = { phase = \"forward\", rank = 1, step = 0 }",
                    "trigger = { type = \"samples\", rank = 1, step = 0 }");
  const testing::CliResult r = run_cli("lesson check 08 --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("dpscope: 08-distributed-sampler: chapter 2 'Rank 1 reads other samples': at the "
                          "same moment as chapter 1 ("),
            std::string::npos)
      << r.output;
}

TEST(LessonTruth, ALiteralNumberInTheNarrationIsRefused) {
  const fs::path dir =
      edited_lesson("04-ddp", "torchrun starts {{ devices | words }} copies", "torchrun starts four copies");
  const testing::CliResult r = run_cli("lesson check 04 --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("dpscope: 04-ddp: chapter 1 'One process per GPU, one process group': number word "
                          "'four' in "),
            std::string::npos)
      << r.output;
}

TEST(LessonTruth, ABadPlaceholderNamesLessonChapterAndReason) {
  const fs::path dir =
      edited_lesson("04-ddp", "({{ param_bytes | bytes }})", "({{ param_bytes | furlongs }})");
  const testing::CliResult r = run_cli("lesson check 04 --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 2) << r.output;  // the lesson does not load: nothing runs
  EXPECT_NE(
      r.output.find("lesson 04-ddp, chapter 2 'Rank 0 broadcasts its weights': narration: placeholder 1 "
                    "'{{ param_bytes | furlongs }}': unknown format 'furlongs' (expected one of: us, ms, "
                    "time, bytes, int, words, x, pct, f1, f2, f3, ordinal)"),
      std::string::npos)
      << r.output;
}

TEST(LessonTruth, ShippedLessonsCountStepsFromOne) {
  // Regression test: L1 chapter 7 said "step 1" where its answer said "2 (counting from 1)".
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult r = run_cli("lesson run 1 --no-viz --out " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("In step 2 (the trace's `step == 1`)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Q6. In which step did the run stop?\n      answer: 2\n"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace dpscope::lesson

namespace dpscope::lesson {
namespace {

TEST(LessonTruth, EveryShippedChapterDeclaresItsPictureAndEveryLessonHasAnExercise) {
  // `lesson check` (LessonCheck.EveryShippedLessonPasses) proves what these declare.
  for (const Lesson& lesson : load_lessons(fs::path(DPSCOPE_SOURCE_DIR) / "lessons")) {
    EXPECT_GE(lesson.exercises.size(), 1u) << lesson.id;
    for (size_t c = 0; c < lesson.chapters.size(); ++c)
      EXPECT_GE(lesson.chapters[c].expect.size(), 1u) << lesson.id << " chapter " << c + 1;
  }
}

}  // namespace
}  // namespace dpscope::lesson
