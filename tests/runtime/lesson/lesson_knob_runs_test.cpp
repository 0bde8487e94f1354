// What a knob offers must run: `lesson check` runs every value a student can pick (a knob's other
// choices, a number knob's min and max) and fails on a run that ends in an error, unless the knob's
// `fails` declares that error for the student to see; and `lesson run --reuse-runs DIR`, which the
// viewer's knobs use, reruns only the runs a knob changes.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/lesson.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

std::string quoted(const fs::path& p) { return fmt::format("'{}'", p.string()); }

// A small bench lesson on one node of h100-sxm (8 GPUs) with a comparison run; `knob` is its
// [[knobs]] table's text.
std::string knob_lesson(const std::string& knob, const std::string& device_args = "") {
  return fmt::format(R"toml(id = "01-knobs"
title = "Knobs"
minutes = 1
goals = ["turn"]
snippet = '''
import torch
'''

[scenario]
args = ["bench", "all_reduce", "--minbytes", "4K", "--maxbytes", "4K", "--iters", "1", "--warmup_iters", "0",
        "--timing-only"{}]

[[scenarios]]
name = "tree"
args = ["bench", "all_reduce", "--minbytes", "4K", "--maxbytes", "4K", "--iters", "1", "--warmup_iters", "0",
        "--timing-only", "--algo", "tree", "--devices", "4"]

{}

[[chapters]]
title = "The all-reduce"
trigger = {{ category = "collective", rank = 0 }}
snippet_line = 1
narration = "It runs."
)toml",
                     device_args, knob);
}

const char* kDevicesUpTo16 = R"toml([[knobs]]
flag = "--devices"
label = "GPUs"
min = 2
max = 16
step = 2
default = 4
)toml";

TEST(LessonKnobRuns, CheckFailsAValueThePanelOffersWhoseRunFails) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-knobs.toml", knob_lesson(kDevicesUpTo16));
  const testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL 01-knobs                     1 problem(s)\n"), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find(fmt::format("dpscope: {}:18: knob --devices: value '16' (one the panel offers): the "
                                "run fails (declare it in the knob's `fails` if the student is meant to "
                                "see it): the scenario failed: --devices 16: a node of preset h100-sxm "
                                "holds 8 GPUs",
                                (dir / "01-knobs.toml").string())),
      std::string::npos)
      << r.output;
  // The min (2) runs: it is not named.
  EXPECT_EQ(r.output.find("value '2'"), std::string::npos) << r.output;
}

TEST(LessonKnobRuns, CheckPassesADeclaredKnobFailureAndFailsOneThatDoesNotHappenOrDiffers) {
  const fs::path dir = testing::scratch_dir();
  const std::string declared = std::string(kDevicesUpTo16) + "fails = { 16 = \"holds 8 GPUs\" }\n";
  testing::write_file(dir / "01-knobs.toml", knob_lesson(declared));
  testing::CliResult r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok   01-knobs "), std::string::npos) << r.output;

  // Declared, but another error: named with both texts.
  const std::string other = std::string(kDevicesUpTo16) + "fails = { 16 = \"out of memory\" }\n";
  testing::write_file(dir / "01-knobs.toml", knob_lesson(other));
  r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(
      r.output.find("knob --devices: value '16': the run fails, but not with \"out of memory\" (`fails`): "
                    "the scenario failed: --devices 16"),
      std::string::npos)
      << r.output;

  // Declared for a value whose run succeeds (a value between min and max is run too when named).
  const std::string runs =
      std::string(kDevicesUpTo16) + "fails = { 6 = \"holds 8 GPUs\", 16 = \"holds 8\" }\n";
  testing::write_file(dir / "01-knobs.toml", knob_lesson(runs));
  r = run_cli("lesson check --lessons-dir " + quoted(dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(
      r.output.find("knob --devices: value '6': the run succeeds, but `fails` says it ends with an error "
                    "containing \"holds 8 GPUs\""),
      std::string::npos)
      << r.output;
}

TEST(LessonKnobRuns, FailsNamesValuesOfTheKnobOtherThanItsDefaultWithAText) {
  const fs::path dir = testing::scratch_dir();
  const fs::path file = dir / "01-knobs.toml";
  const auto error = [&](const std::string& fails) {
    testing::write_file(file, knob_lesson(std::string(kDevicesUpTo16) + fails + "\n"));
    try {
      (void)load_lesson(file);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      std::string message = e.what();
      if (message.starts_with(file.string())) message.replace(0, file.string().size(), "F");
      return message;
    }
    return std::string("(loaded)");
  };
  EXPECT_EQ(
      error("fails = { 5 = \"x\" }"),
      "F:25: knob --devices: fails: '5' is not a value of the knob: --devices must be a number from 2 to 16 "
      "in steps of 2, got '5'");
  EXPECT_EQ(error("fails = { 4 = \"x\" }"),
            "F:25: knob --devices: fails: '4' is the default, whose run is the lesson's own ([scenario] "
            "expect_error declares a lesson whose run fails)");
  EXPECT_EQ(error("fails = { 16 = \"\" }"),
            "F:25: knob --devices: fails: '16' must give a part of the error message, not \"\"");
  EXPECT_EQ(error("fails = { 16 = 3 }").substr(0, 5), "F:25:");
  EXPECT_EQ(error("fails = [\"16\"]").substr(0, 5), "F:25:");
  const Lesson loaded = [&] {
    testing::write_file(file, knob_lesson(std::string(kDevicesUpTo16) + "fails = { 16 = \"holds 8\" }\n"));
    return load_lesson(file);
  }();
  ASSERT_EQ(loaded.knobs.size(), 1u);
  EXPECT_EQ(loaded.knobs[0].fails, (std::map<std::string, std::string>{{"16", "holds 8"}}));
}

// The viewer's knob: the second run with the same knobs reuses both traces (byte for byte the
// first run's); a knob the comparison does not take reruns only the lesson's own scenario.
TEST(LessonKnobRuns, ReuseRunsRerunsOnlyWhatAKnobChanges) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-knobs.toml", knob_lesson(kDevicesUpTo16));
  const fs::path reused = dir / "reused";
  const auto run = [&](const std::string& out, const std::string& knob) {
    return run_cli(fmt::format("lesson run 01-knobs --no-viz --lessons-dir {} --out {} --reuse-runs {}{}",
                               quoted(dir), quoted(dir / out), quoted(reused), knob));
  };
  const testing::CliResult first = run("a", "");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("its trace is reused"), std::string::npos) << first.output;
  size_t kept = 0;
  for (const auto& entry : fs::directory_iterator(reused))
    kept += entry.path().extension() == ".args" ? 1 : 0;
  EXPECT_EQ(kept, 2u);  // the scenario and its comparison

  const testing::CliResult again = run("b", "");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(the same run was made earlier: its trace is reused)"), std::string::npos)
      << again.output;
  EXPECT_EQ(testing::read_file(dir / "a" / "01-knobs.trace.jsonl"),
            testing::read_file(dir / "b" / "01-knobs.trace.jsonl"));
  EXPECT_EQ(testing::read_file(dir / "a" / "01-knobs.tree.trace.jsonl"),
            testing::read_file(dir / "b" / "01-knobs.tree.trace.jsonl"));

  // --devices 8: a new run of the scenario (8 ranks), the comparison's 4-GPU trace reused.
  const testing::CliResult turned = run("c", " --knob devices=8");
  ASSERT_EQ(turned.exit_code, 0) << turned.output;
  EXPECT_EQ(turned.output.find("its trace is reused"), std::string::npos) << turned.output;
  EXPECT_NE(testing::read_file(dir / "c" / "01-knobs.trace.jsonl"),
            testing::read_file(dir / "a" / "01-knobs.trace.jsonl"));
  EXPECT_EQ(testing::read_file(dir / "c" / "01-knobs.tree.trace.jsonl"),
            testing::read_file(dir / "a" / "01-knobs.tree.trace.jsonl"));
  kept = 0;
  for (const auto& entry : fs::directory_iterator(reused))
    kept += entry.path().extension() == ".args" ? 1 : 0;
  EXPECT_EQ(kept, 3u);
}

// A kept trace whose command line does not match (a hash shared, a file edited) is not used.
TEST(LessonKnobRuns, AKeptTraceIsUsedOnlyForItsOwnCommandLine) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-knobs.toml", knob_lesson(kDevicesUpTo16));
  const fs::path reused = dir / "reused";
  const std::string command =
      fmt::format("lesson run 01-knobs --no-viz --lessons-dir {} --out {} --reuse-runs {}", quoted(dir),
                  quoted(dir / "a"), quoted(reused));
  ASSERT_EQ(run_cli(command).exit_code, 0);
  for (const auto& entry : fs::directory_iterator(reused))
    if (entry.path().extension() == ".args") testing::write_file(entry.path(), "another command line");
  const testing::CliResult r = run_cli(command);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("its trace is reused"), std::string::npos) << r.output;
}

// Runs on a measured clock (--device cpu) and runs that write files of their own ({scratch}) are
// never kept: their traces are not a function of the command line.
TEST(LessonKnobRuns, MeasuredAndFileWritingRunsAreNotKept) {
  const fs::path dir = testing::scratch_dir();
  const std::string measured = fmt::format(R"toml(id = "01-cpu"
title = "On the CPU"
minutes = 1
goals = ["measure"]
snippet = '''
import torch
'''

[scenario]
args = ["train", "--mode", "single", "--device", "cpu", "--model", "4-8-2", "--dataset", "blobs:64:4:2",
        "--batch", "8", "--steps", "1"]

[[scenarios]]
name = "saved"
args = ["train", "--mode", "single", "--model", "4-8-2", "--dataset", "blobs:64:4:2", "--batch", "8",
        "--steps", "1", "--checkpoint-dir", "{{scratch}}/ckpt", "--checkpoint-every", "1"]

[[chapters]]
title = "Forward"
trigger = {{ phase = "forward", rank = 0 }}
snippet_line = 1
narration = "Forward."
)toml");
  testing::write_file(dir / "01-cpu.toml", measured);
  const fs::path reused = dir / "reused";
  const std::string command =
      fmt::format("lesson run 01-cpu --no-viz --lessons-dir {} --out {} --reuse-runs {}", quoted(dir),
                  quoted(dir / "a"), quoted(reused));
  testing::CliResult r = run_cli(command);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli(command);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("its trace is reused"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(reused));
}

// A lesson declares its chapters' pictures for its default knobs (lesson check proves them there).
// With a knob turned (lesson 12 on one node has no hierarchical phases to show), `run` says so in
// one note instead of a problem line per picture; at the defaults it has nothing to say.
TEST(LessonKnobRuns, PicturesDeclaredForTheDefaultKnobsAreANoteWhenAKnobIsTurned) {
  const std::string lessons = quoted(fs::path(DPSCOPE_SOURCE_DIR) / "lessons");
  const fs::path dir = testing::scratch_dir();
  const testing::CliResult turned = run_cli(fmt::format(
      "lesson run 12 --no-viz --lessons-dir {} --out {} --knob devices=8", lessons, quoted(dir / "turned")));
  ASSERT_EQ(turned.exit_code, 0) << turned.output;
  EXPECT_EQ(turned.output.find("dpscope: "), std::string::npos) << turned.output;
  EXPECT_NE(turned.output.find("note: with these knobs "), std::string::npos) << turned.output;
  EXPECT_NE(turned.output.find(" of the chapters' declared pictures show another moment of the story than at "
                               "the default knobs, where `dpscope lesson check 12-scaling` proves them\n"),
            std::string::npos)
      << turned.output;
  const testing::CliResult defaults =
      run_cli(fmt::format("lesson run 12 --no-viz --lessons-dir {} --out {} --knob devices=1024", lessons,
                          quoted(dir / "defaults")));
  ASSERT_EQ(defaults.exit_code, 0) << defaults.output;
  EXPECT_EQ(defaults.output.find("note: "), std::string::npos) << defaults.output;
  EXPECT_EQ(defaults.output.find("dpscope: "), std::string::npos) << defaults.output;
}

TEST(LessonKnobRuns, ReuseRunsMustBeADirectory) {
  const fs::path dir = testing::scratch_dir();
  testing::write_file(dir / "01-knobs.toml", knob_lesson(kDevicesUpTo16));
  testing::write_file(dir / "file", "x");
  const testing::CliResult r =
      run_cli(fmt::format("lesson run 01-knobs --no-viz --lessons-dir {} --out {} --reuse-runs {}",
                          quoted(dir), quoted(dir / "a"), quoted(dir / "file")));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output,
            fmt::format("dpscope: error: --reuse-runs {}: not a directory\n", (dir / "file").string()));
  EXPECT_EQ(testing::read_file(dir / "file"), "x");
}

}  // namespace
}  // namespace dpscope::lesson
