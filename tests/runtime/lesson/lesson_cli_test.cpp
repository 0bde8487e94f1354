// `dpscope lesson list|run|check|handout`, run as the built binary, and the shipped lessons
// themselves: `LessonCheck.EveryShippedLessonPasses` is the suite's `dpscope lesson check` (every
// trigger fires, every answer is computed, every snippet compiles as Python), and the DDP lesson's
// claim that 4 GPUs beat 1 is measured.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpscope/lesson/expression.hpp"
#include "dpscope/lesson/lesson.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

const fs::path kLessons = fs::path(DPSCOPE_SOURCE_DIR) / "lessons";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  for (size_t at = 0; at < text.size();) {
    if (text.compare(at, prefix.size(), prefix) == 0) ++n;
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return n;
}

// Lesson 14 runs a real PyTorch script: where no Python imports torch it is skipped, saying so, and
// every other lesson still runs. (CI installs python3-torch: there it runs.)
TEST(LessonCheck, EveryShippedLessonPasses) {
  const size_t lessons = lesson_files(kLessons).size();
  ASSERT_GE(lessons, 14u);
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(kLessons));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t skipped =
      count_lines_starting(r.output, "skip 14-your-pytorch-script       skipped: PyTorch is not installed");
  EXPECT_LE(skipped, 1u) << r.output;
  EXPECT_EQ(count_lines_starting(r.output, "ok   "), lessons - skipped) << r.output;
  EXPECT_NE(r.output.find(
                fmt::format("{} lesson(s) checked, all triggers fire and every answer is computed{}\n",
                            lessons - skipped, skipped == 0 ? "" : "; 1 skipped (PyTorch is not installed)")),
            std::string::npos)
      << r.output;
}

// Without PyTorch, `lesson check` skips lesson 14 in one visible line (exit 0: nothing is wrong with
// the lesson), and `lesson run` fails in one line naming what is missing and how to get it.
TEST(LessonCli, APyTorchLessonWithoutPyTorchIsSkippedByCheckAndRefusedByRun) {
  const std::string no_torch = "DPSCOPE_PYTHON=/bin/false ";
  const testing::CliResult check = dpscope::testing::run_command(
      no_torch + DPSCOPE_CLI + " lesson check 14 --lessons-dir " + quoted(kLessons));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(
      check.output.find("skip 14-your-pytorch-script       skipped: PyTorch is not installed: no Python here "
                        "imports torch (tried $DPSCOPE_PYTHON (/bin/false)); install it (Debian: apt "
                        "install python3-torch) or name a Python that has it in DPSCOPE_PYTHON\n"),
      std::string::npos)
      << check.output;
  EXPECT_NE(
      check.output.find("0 lesson(s) checked, all triggers fire and every answer is computed; 1 skipped "
                        "(PyTorch is not installed)\n"),
      std::string::npos)
      << check.output;
  const fs::path out = testing::scratch_dir();
  const testing::CliResult run =
      dpscope::testing::run_command(no_torch + DPSCOPE_CLI + " lesson run 14 --no-viz --out " + quoted(out) +
                                    " --lessons-dir " + quoted(kLessons));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_EQ(count_lines_starting(run.output, "dpscope: error: "), 1u) << run.output;
  EXPECT_NE(run.output.find("dpscope: error: PyTorch is not installed: no Python here imports torch"),
            std::string::npos)
      << run.output;
}

// A lesson with one problem of each kind the check looks for.
const char* kBrokenLesson = R"toml(id = "01-broken"
title = "Broken"
minutes = 1
goals = ["fail"]
snippet = '''
def f(:
    pass
'''

[scenario]
args = ["train", "--mode", "single", "--model", "4-8-2", "--dataset", "blobs:32:4:2", "--batch", "8", "--steps", "1"]

[[chapters]]
title = "Never"
trigger = { name = "checkpoint_saved" }
snippet_line = 1
narration = "Nothing."

[[questions]]
chapter = 1
prompt = "How many?"
answer = "count(type=transfer, rank=3)"
unit = ""
)toml";

TEST(LessonCli, CheckFailsWithOneLinePerProblemNamingLessonAndItem) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-broken.toml", kBrokenLesson);
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL 01-broken                    3 problem(s)\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(
                "dpscope: 01-broken: chapter 1 'Never': trigger { name = 'checkpoint_saved' } never fires\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(
      r.output.find("dpscope: 01-broken: question 1: answer cannot be computed: count(type=transfer, rank=3) "
                    "matches no event (count(type=transfer, rank=3))\n"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("dpscope: 01-broken: snippet does not compile as Python: SyntaxError"),
            std::string::npos)
      << r.output;
  // The one error line carries the first problem, so a caller that keeps only it still reads why.
  EXPECT_NE(
      r.output.find("dpscope: error: lesson check: 3 problem(s) in 1 of 1 lesson(s); the first: 01-broken: "
                    "chapter 1 'Never': trigger { name = 'checkpoint_saved' } never fires\n"),
      std::string::npos)
      << r.output;
}

// A small DDP lesson whose run stops with the process group's mismatch error (lesson 13's pitfall),
// declared or not: `check` passes when the declared failure happens, and fails with one clear line
// when it does not happen or was not declared.
std::string failing_lesson(const std::string& id, const std::string& pitfall, const std::string& expect) {
  return fmt::format(R"toml(id = "{}"
title = "Fails"
minutes = 1
goals = ["stop"]
snippet = '''
import torch
'''

[scenario]
args = ["train", "--mode", "ddp", "--devices", "2", "--model", "4-8-2", "--dataset", "blobs:64:4:2",
        "--batch", "8", "--steps", "3"{}]
{}

[[chapters]]
title = "The first step"
trigger = {{ name = "grad_ready", rank = 0, step = 0 }}
snippet_line = 1
narration = "Backward."
)toml",
                     id, pitfall.empty() ? "" : ", \"--pitfall\", \"" + pitfall + "\"",
                     expect.empty() ? "" : "expect_error = \"" + expect + "\"");
}

TEST(LessonCli, CheckPassesADeclaredFailureThatHappens) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-fails.toml", failing_lesson("01-fails", "mismatched-collective",
                                                            "Detected mismatch between collectives"));
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok   01-fails "), std::string::npos) << r.output;
}

TEST(LessonCli, CheckFailsADeclaredFailureThatDoesNotHappen) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-fails.toml",
                      failing_lesson("01-fails", "", "Detected mismatch between collectives"));
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL 01-fails "), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("dpscope: 01-fails: the scenario is declared to fail with 'Detected mismatch between "
                    "collectives' (expect_error) but ran to the end\n"),
      std::string::npos)
      << r.output;
}

TEST(LessonCli, CheckFailsAnUndeclaredFailureWithOneLine) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-fails.toml", failing_lesson("01-fails", "mismatched-collective", ""));
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL 01-fails                     1 problem(s)\n"), std::string::npos) << r.output;
  // Whichever rank's error spawn() reports first: every rank fails with the same mismatch.
  EXPECT_NE(r.output.find("dpscope: 01-fails: the scenario failed: rank "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" failed: Detected mismatch between collectives on ranks."), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(a lesson whose run fails declares it: [scenario] expect_error)\n"),
            std::string::npos)
      << r.output;
}

// A PyTorch scenario whose script raises (ddp_tutorial.py --fail-at-step): the ranks' traces up to
// their `error` events are merged into the lesson's trace, the failure is named by the error the
// script raised (not only the launcher's exit status), and a lesson that declares it watches it.
const char* kRaisingTorchLesson = R"toml(id = "01-raises"
title = "A PyTorch run that raises"
minutes = 1
goals = ["watch a rank raise"]
snippet = '''
raise RuntimeError("x")
'''

[scenario]
args = ["launch", "--nproc", "2", "--", "python3", "-m", "dpscope_torch.run",
        "examples/pytorch/ddp_tutorial.py", "--epochs", "1", "--samples", "128", "--fail-at-step", "1"]
DECLARED

[[chapters]]
title = "The error"
trigger = { name = "error" }
snippet_line = 1
narration = "Rank {{ first(rank, name=error) }} raised."
)toml";

TEST(LessonCli, APyTorchRunThatRaisesIsNamedByItsErrorAndWatchedWhenDeclared) {
  const auto check = [](const std::string& declared) {
    const fs::path dir = testing::scratch_dir();
    std::string text = kRaisingTorchLesson;
    text.replace(text.find("DECLARED"), 8, declared);
    testing::write_file(dir / "01-raises.toml", text);
    return run_cli("lesson check --lessons-dir " + quoted(dir));
  };
  const testing::CliResult undeclared = check("");
  if (undeclared.output.find("skipped: PyTorch is not installed") != std::string::npos)
    GTEST_SKIP() << "no Python here imports torch: " << undeclared.output;
  EXPECT_EQ(undeclared.exit_code, 1) << undeclared.output;
  EXPECT_NE(undeclared.output.find(
                "dpscope: 01-raises: the scenario failed: the PyTorch run failed (exit 1): rank "),
            std::string::npos)
      << undeclared.output;
  EXPECT_NE(undeclared.output.find(": RuntimeError: failing on purpose at step 1 (--fail-at-step)"),
            std::string::npos)
      << undeclared.output;
  const testing::CliResult declared = check("expect_error = \"failing on purpose\"");
  EXPECT_EQ(declared.exit_code, 0) << declared.output;
  EXPECT_NE(declared.output.find("ok   01-raises"), std::string::npos) << declared.output;
}

// `lesson run 14` records the real PyTorch job (where PyTorch is installed): it says where the ranks'
// traces grow and how to watch them live, prints the answers computed from PyTorch's trace, and
// leaves the merged trace and the simulation's trace beside each other.
TEST(LessonCli, RunOfThePyTorchLessonRecordsTheRealJobBesideTheSimulation) {
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult r = run_cli("lesson run 14 --no-viz --out " + quoted(dir));
  if (r.output.find("PyTorch is not installed") != std::string::npos)
    GTEST_SKIP() << "no Python here imports torch: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path ranks = dir / "14-your-pytorch-script.scratch" / "trace";
  EXPECT_NE(r.output.find("watch it live from another terminal:\n  dpscope-viz --follow " + ranks.string()),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_regular_file(ranks / "rank-0.jsonl"));
  EXPECT_TRUE(fs::is_regular_file(ranks / "rank-1.jsonl"));
  EXPECT_NE(
      r.output.find("Q2. How many buckets does DDP all-reduce in the first step?\n      answer: 1 buckets"),
      std::string::npos)
      << r.output;
  const trace::TraceData real = trace::read_trace(dir / "14-your-pytorch-script.trace.jsonl");
  const trace::TraceData sim = trace::read_trace(dir / "14-your-pytorch-script.sim.trace.jsonl");
  EXPECT_EQ(real.header.clock, "measured");
  EXPECT_NE(real.header.run_json.find("\"source\":\"dpscope_torch\""), std::string::npos)
      << real.header.run_json;
  EXPECT_EQ(real.header.params.size(), sim.header.params.size());
}

TEST(LessonCli, ListShowsIdMinutesAndTitle) {
  const testing::CliResult r = run_cli("lesson list --lessons-dir " + quoted(kLessons));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const Lesson first = load_lesson(lesson_files(kLessons).front());
  EXPECT_TRUE(
      r.output.starts_with(fmt::format("{:<28} {:>3} min  {}\n", first.id, first.minutes, first.title)))
      << r.output;
}

TEST(LessonCli, RunPrintsChaptersAndAnswersAndWritesTheTrace) {
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult r = run_cli("lesson run 5 --no-viz --knob devices=3 --out " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir / "05-ring-allreduce.trace.jsonl"));
  // Three GPUs: 2 (N - 1) = 4 ring steps, N - 1 = 2 additions.
  EXPECT_NE(r.output.find("== lesson 05-ring-allreduce: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("How many steps does the whole ring all-reduce take?\n      answer: 4 steps\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("answer: 2 additions\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chapter 1 at 0 ns: "), std::string::npos) << r.output;
}

TEST(LessonCli, HandoutWritesTheMarkdownPage) {
  const fs::path dir = testing::scratch_dir() / "handouts";
  const testing::CliResult r = run_cli("lesson handout 01-one-gpu --no-png " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string md = testing::read_file(dir / "01-one-gpu.md");
  EXPECT_EQ(md.find(".png"), std::string::npos) << "--no-png draws nothing";
  EXPECT_TRUE(md.starts_with("# Lesson 01-one-gpu: ")) << md.substr(0, 200);
  EXPECT_NE(md.find("\n## Answer key\n\n### Questions\n\n1. 524288 bytes"), std::string::npos) << md;
  EXPECT_NE(md.find("```python\nimport torch\n"), std::string::npos);
  EXPECT_EQ(r.output, fmt::format("handout: {} (trace {})\n", (dir / "01-one-gpu.md").string(),
                                  (dir / "01-one-gpu.trace.jsonl").string()));
}

// Without --no-png the handout draws every chapter with dpscope-viz at the chapter's moment (under
// xvfb-run without a display) and shows each picture under its chapter's title.
TEST(LessonCli, HandoutDrawsEveryChapter) {
  const fs::path viz = fs::path(DPSCOPE_CLI).parent_path() / "dpscope-viz";
  if (!fs::exists(viz)) GTEST_SKIP() << "dpscope-viz is not built in this build";
  const bool display = std::getenv("DISPLAY") != nullptr && *std::getenv("DISPLAY") != '\0';
  if (!display && dpscope::testing::run_command("command -v xvfb-run").exit_code != 0)
    GTEST_SKIP() << "no display and no xvfb-run";
  const fs::path dir = testing::scratch_dir() / "handout-png";
  const testing::CliResult r = run_cli("lesson handout 01-one-gpu " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("chapter pictures: 7 of 7 in "), std::string::npos) << r.output;
  const std::string md = testing::read_file(dir / "01-one-gpu.md");
  for (int c = 1; c <= 6; ++c) {
    const std::string name = fmt::format("01-one-gpu-chapter-{}.png", c);
    EXPECT_EQ(testing::read_file(dir / name).substr(0, 8), "\x89PNG\r\n\x1a\n") << name;
    EXPECT_NE(md.find(fmt::format("![Chapter {}: ", c)), std::string::npos) << md;
    EXPECT_NE(md.find("(" + name + ")"), std::string::npos) << md;
  }
}

// `{scratch}` in a scenario is emptied before each run: lesson 11 writes checkpoints there, and a
// second run into the same directory starts afresh instead of meeting the first run's checkpoints.
TEST(LessonCli, ScratchDirectoryIsEmptiedSoALessonCanRunTwice) {
  const fs::path dir = testing::scratch_dir();
  for (int run = 0; run < 2; ++run) {
    const testing::CliResult r = run_cli("lesson run 11 --no-viz --knob devices=2 --out " + quoted(dir));
    ASSERT_EQ(r.exit_code, 0) << "run " << run << ": " << r.output;
    EXPECT_NE(r.output.find("answer: 2 checkpoints"), std::string::npos) << r.output;
  }
  const fs::path ckpt = dir / "11-checkpoints.scratch" / "ckpt";
  EXPECT_TRUE(fs::exists(ckpt / "checkpoint-00000004.safetensors"));
}

// `lesson check` without --out works in TMPDIR/dpscope-lesson-check-PID-XXXXXX: gone after a normal
// run and after SIGTERM in the middle of one, and the directory of a check killed outright (SIGKILL)
// is swept by the next start. A killed check once left its directory behind (339 MB once).
TEST(LessonCli, CheckLeavesNoTemporaryDirectoryBehind) {
  const fs::path tmp = testing::scratch_dir() / "tmp";
  fs::create_directories(tmp);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  fs::create_directories(tmp / fmt::format("dpscope-lesson-check-{}", dead) / "01-one-gpu.scratch");
  fs::create_directories(tmp / fmt::format("dpscope-lesson-check-{}-abcdef", dead));
  const std::string live = fmt::format("dpscope-lesson-check-{}-ghijkl", ::getpid());  // this test runs
  fs::create_directories(tmp / live);
  const std::string env = "TMPDIR=" + quoted(tmp) + " ";
  const testing::CliResult r = dpscope::testing::run_command(env + DPSCOPE_CLI + " lesson check 01");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto names = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(tmp)) out.push_back(e.path().filename().string());
    return out;
  };
  EXPECT_EQ(names(), std::vector<std::string>{live});
  // SIGTERM while the lessons run: the check's directory appears, then goes with the process.
  const fs::path script = tmp.parent_path() / "kill.sh";
  testing::write_file(script, fmt::format(R"sh(export TMPDIR='{}'
'{}' lesson check --lessons-dir '{}' >/dev/null 2>&1 &
pid=$!
while [ "$(ls "$TMPDIR" | wc -l)" -lt 2 ]; do sleep 0.05; done
sleep 0.5
kill -TERM $pid
wait $pid
echo "status=$?"
)sh",
                                          tmp.string(), DPSCOPE_CLI, kLessons.string()));
  const testing::CliResult killed = dpscope::testing::run_command("timeout 60 bash " + quoted(script));
  EXPECT_NE(killed.output.find("status=143"), std::string::npos) << killed.output;  // 128 + SIGTERM
  EXPECT_EQ(names(), std::vector<std::string>{live});
}

// A child still running when the check is stopped is ended first: py_compile, killed with its
// parent once, made the removed directory again when it wrote its __pycache__ (a CI run saw it).
// Here a slow stand-in for python3 writes beside the snippet a second after it starts.
TEST(LessonCli, CheckStoppedWhileAChildRunsLeavesNoDirectoryBehind) {
  const fs::path scratch = testing::scratch_dir();
  const fs::path tmp = scratch / "tmp";
  const fs::path bin = scratch / "bin";
  const fs::path started = scratch / "py_compile-started";
  fs::create_directories(tmp);
  fs::create_directories(bin);
  testing::write_file(bin / "python3", fmt::format(R"sh(#!/bin/sh
touch '{}'
sleep 1
mkdir -p "$(dirname "$3")/__pycache__"
)sh",
                                                   started.string()));
  fs::permissions(bin / "python3", fs::perms::owner_all);
  const fs::path script = scratch / "kill.sh";
  testing::write_file(script, fmt::format(R"sh(export TMPDIR='{}' PATH='{}':"$PATH"
'{}' lesson check 01 >/dev/null 2>&1 &
pid=$!
while [ ! -e '{}' ]; do sleep 0.02; done
kill -TERM $pid
wait $pid
echo "status=$?"
sleep 2
)sh",
                                          tmp.string(), bin.string(), DPSCOPE_CLI, started.string()));
  const testing::CliResult killed = dpscope::testing::run_command("timeout 120 bash " + quoted(script));
  EXPECT_NE(killed.output.find("status=143"), std::string::npos) << killed.output;
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(tmp)) left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << fmt::format("{}", fmt::join(left, "\n"));
}

// The handout's command names the scratch directory relative to the handout's own folder: it works
// when run from there, and names nothing of the machine that wrote it.
TEST(LessonCli, HandoutShowsTheScratchDirectoryBesideTheHandout) {
  const fs::path dir = testing::scratch_dir() / "handout-scratch";
  const testing::CliResult r = run_cli("lesson handout 11 --no-png " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = testing::read_file(dir / "11-checkpoints.md");
  EXPECT_NE(md.find(" --checkpoint-dir 11-checkpoints.scratch/ckpt "), std::string::npos) << md;
  EXPECT_EQ(md.find(dir.string()), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir / "11-checkpoints.scratch" / "ckpt" / "checkpoint-00000004.safetensors"));
}

// docs/lessons.md's complete example is a lesson that passes the check, so the doc cannot drift.
TEST(LessonDocs, TheCompleteExampleIsAWorkingLesson) {
  const std::string doc = testing::read_file(fs::path(DPSCOPE_SOURCE_DIR) / "docs" / "lessons.md");
  const size_t section = doc.find("## A complete example");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = doc.find("```toml\n", section);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc.find("```\n", begin + 8);
  ASSERT_NE(end, std::string::npos);
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "09-ring-steps.toml", doc.substr(begin + 8, end - begin - 8));
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok   09-ring-steps                2 chapters, 2 questions"), std::string::npos)
      << r.output;
}

// Lesson 4 says four GPUs with 512 samples each take less time per step than one GPU with all 2048;
// lesson 3 says DataParallel on four GPUs does not.
TEST(DdpLesson, FourGpusTakeLessTimePerStepThanOneWithTheSameGlobalBatchAndDataParallelDoesNot) {
  const fs::path dir = testing::scratch_dir();
  const Lesson ddp = load_lesson(kLessons / "04-ddp.toml");
  const std::vector<std::string> args = scenario_args(ddp);
  auto value_of = [&](const std::string& flag) {
    const auto it = std::find(args.begin(), args.end(), flag);
    return it != args.end() && it + 1 != args.end() ? *(it + 1) : std::string();
  };
  ASSERT_EQ(value_of("--mode"), "ddp");
  ASSERT_EQ(value_of("--devices"), "4");
  const int64_t global_batch = std::stoll(value_of("--batch")) * 4;

  TrainConfig single;
  single.mode = TrainMode::kSingle;
  single.model = value_of("--model");
  single.dataset = value_of("--dataset");
  single.batch = global_batch;
  single.steps = 2;
  single.shuffle = false;
  single.trace = (dir / "single.jsonl").string();
  run_training(single);
  const testing::CliResult r = run_cli("lesson run 04 --no-viz --out " + quoted(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const Expression step_us = Expression::parse("span(rank=0, step=1) / 1000");
  const double single_us = step_us.evaluate(trace::read_trace(dir / "single.jsonl"));
  const double ddp_us = step_us.evaluate(trace::read_trace(dir / "04-ddp.trace.jsonl"));
  EXPECT_LT(ddp_us, single_us) << "DDP " << ddp_us << " us vs one GPU " << single_us << " us per step";

  // Lesson 3 says DataParallel on four GPUs is no faster than one GPU on the same batch.
  const Lesson dp = load_lesson(kLessons / "03-why-dp-is-slow.toml");
  const std::vector<std::string> dp_args = scenario_args(dp);
  const auto batch = std::find(dp_args.begin(), dp_args.end(), "--batch");
  ASSERT_NE(batch, dp_args.end());
  ASSERT_EQ(std::stoll(*(batch + 1)), global_batch);
  const testing::CliResult dp_run = run_cli("lesson run 03 --no-viz --out " + quoted(dir));
  ASSERT_EQ(dp_run.exit_code, 0) << dp_run.output;
  const double dp_us = Expression::parse("span(step=1) / 1000")
                           .evaluate(trace::read_trace(dir / "03-why-dp-is-slow.trace.jsonl"));
  EXPECT_GE(dp_us, single_us) << "DataParallel " << dp_us << " us vs one GPU " << single_us << " us per step";
}

// Lesson 7 says larger buckets leave more communication exposed after backward and lengthen the step.
TEST(BucketLesson, LargerBucketsLeaveMoreExposedAndMakeTheStepLonger) {
  const fs::path dir = testing::scratch_dir();
  const Expression exposed_us = Expression::parse(
      "(max(ts_ns, name=bucket_done, rank=0, step=1) - max(ts_ns, name=grad_ready, rank=0, step=1)) / 1000");
  const Expression step_us = Expression::parse("span(rank=0, step=1) / 1000");
  std::vector<std::pair<double, double>> runs;  // (exposed, step) for bucket_cap_mb 1, then 25
  for (const char* mb : {"1", "25"}) {
    const fs::path out = dir / mb;
    const testing::CliResult r =
        run_cli(fmt::format("lesson run 07 --no-viz --knob bucket-mb={} --out {}", mb, quoted(out)));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const trace::TraceData data = trace::read_trace(out / "07-buckets-overlap.trace.jsonl");
    runs.emplace_back(exposed_us.evaluate(data), step_us.evaluate(data));
  }
  EXPECT_LT(runs[0].first, runs[1].first) << "exposed us at 1 MB vs 25 MB";
  EXPECT_LT(runs[0].second, runs[1].second) << "step us at 1 MB vs 25 MB";
}

}  // namespace
}  // namespace dpscope::lesson
