// Lesson files (lesson/lesson.hpp): a complete file loads field by field, and every kind of mistake
// is one error naming FILE:LINE and the key.
#include "dpscope/lesson/lesson.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

#include "dpscope/base/error.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

// A complete lesson; line numbers matter to the error tests below.
const std::string kGood = R"toml(id = "09-sample"
title = "A sample"
minutes = 5
goals = ["one", "two"]
snippet = '''
import torch
x = torch.ones(2)
'''

[scenario]
args = ["train", "--steps", "2"]

[[knobs]]
flag = "--devices"
label = "GPUs"
min = 2
max = 8
step = 2
default = 4

[[knobs]]
flag = "--algo"
label = "algorithm"
choices = ["ring", "tree"]
default = "ring"

[[knobs]]
flag = "--zero"
label = "ZeRO"
switch = true
default = "off"

[[chapters]]
title = "Start"
trigger = { type = "transfer", algo_step = 1, rank = 0 }
snippet_line = 2
narration = "Look."

[[questions]]
chapter = 1
prompt = "How many?"
answer = "count(type=transfer)"
unit = "transfers"
tolerance = 0
explain = "Because."
)toml";

class LessonFile : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::scratch_dir(); }

  // Writes `text` as 09-sample.toml and loads it.
  Lesson load(const std::string& text) {
    testing::write_file(file(), text);
    return load_lesson(file());
  }
  // The message of the error loading `text` throws, with the file's path replaced by "F".
  std::string error(const std::string& text) {
    try {
      load(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      std::string message = e.what();
      const std::string path = file().string();
      if (message.starts_with(path)) message = "F" + message.substr(path.size());
      return message;
    }
    return "(loaded)";
  }
  // kGood with `from` replaced by `to` (which must be there).
  static std::string good_with(const std::string& from, const std::string& to) {
    std::string text = kGood;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  }
  std::filesystem::path file() const { return dir_ / "09-sample.toml"; }

  std::filesystem::path dir_;
};

TEST_F(LessonFile, LoadsEveryField) {
  const Lesson l = load(kGood);
  EXPECT_EQ(l.id, "09-sample");
  EXPECT_EQ(l.title, "A sample");
  EXPECT_EQ(l.minutes, 5);
  EXPECT_EQ(l.goals, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(l.snippet, "import torch\nx = torch.ones(2)\n");
  EXPECT_EQ(l.snippet_lines(), 2);
  EXPECT_EQ(l.scenario, (std::vector<std::string>{"train", "--steps", "2"}));
  ASSERT_EQ(l.knobs.size(), 3u);
  EXPECT_TRUE(l.knobs[0].numeric);
  EXPECT_EQ(l.knobs[0].default_value, "4");
  EXPECT_DOUBLE_EQ(l.knobs[0].step, 2.0);
  EXPECT_EQ(l.knobs[1].choices, (std::vector<std::string>{"ring", "tree"}));
  EXPECT_TRUE(l.knobs[2].is_switch);
  ASSERT_EQ(l.chapters.size(), 1u);
  EXPECT_EQ(l.chapters[0].title, "Start");
  EXPECT_EQ(l.chapters[0].trigger.type, trace::EventType::kTransfer);
  EXPECT_EQ(l.chapters[0].trigger.algo_step, 1);
  EXPECT_EQ(l.chapters[0].trigger.rank, 0);
  EXPECT_EQ(l.chapters[0].trigger.nth, 1);  // a trigger fires at the first match by default
  EXPECT_EQ(l.chapters[0].snippet_line, 2);
  ASSERT_EQ(l.questions.size(), 1u);
  EXPECT_EQ(l.questions[0].answer.text(), "count(type=transfer)");
  EXPECT_EQ(l.questions[0].unit, "transfers");
  EXPECT_DOUBLE_EQ(l.questions[0].tolerance, 0.0);
  EXPECT_EQ(l.questions[0].explain, "Because.");
}

TEST_F(LessonFile, UnknownKeysAreNamedWithTheirLine) {
  EXPECT_EQ(error(good_with("minutes = 5", "minutes = 5\ntitel = \"x\"")),
            "F:4: unknown key 'titel' in the lesson (expected one of: id, title, goals, minutes, scenario, "
            "scenarios, knobs, snippet, chapters, questions, exercises)");
  EXPECT_EQ(error(good_with("narration = \"Look.\"", "narration = \"Look.\"\nnarative = 1")),
            "F:38: unknown key 'narative' in [[chapters]] 1 (expected one of: title, trigger, narration, "
            "snippet_line, expect, compare)");
  EXPECT_EQ(
      error(good_with("unit = \"transfers\"", "unit = \"transfers\"\nunits = \"x\"")),
      "F:44: unknown key 'units' in question 1 (expected one of: chapter, prompt, answer, unit, tolerance, "
      "explain)");
  EXPECT_EQ(error(good_with("step = 2\n", "step = 2\nstride = 1\n")),
            "F:19: unknown key 'stride' in [[knobs]] (expected one of: flag, label, min, max, step, choices, "
            "switch, default, fails)");
}

TEST_F(LessonFile, MissingKeysAreNamed) {
  EXPECT_EQ(error(good_with("title = \"A sample\"\n", "")), "F:1: the lesson is missing 'title'");
  EXPECT_EQ(error(good_with("narration = \"Look.\"\n", "")), "F:33: [[chapters]] 1 is missing 'narration'");
  EXPECT_EQ(error(good_with("answer = \"count(type=transfer)\"\n", "")),
            "F:39: question 1 is missing 'answer'");
  EXPECT_EQ(error(good_with("default = \"ring\"\n", "")), "F:21: [[knobs]] is missing 'default'");
}

TEST_F(LessonFile, BadTypesAreNamed) {
  EXPECT_EQ(error(good_with("minutes = 5", "minutes = \"five\"")),
            "F:3: 'minutes' must be an integer, got a string");
  EXPECT_EQ(error(good_with("goals = [\"one\", \"two\"]", "goals = \"one\"")),
            "F:4: 'goals' must be an array, got a string");
  EXPECT_EQ(error(good_with("snippet_line = 2", "snippet_line = \"2\"")),
            "F:36: 'snippet_line' must be an integer, got a string");
  EXPECT_EQ(error(good_with("algo_step = 1, rank", "algo_step = 1.5, rank")),
            "F:35: 'algo_step' must be an integer or a string, got a number");
  EXPECT_EQ(error(good_with("min = 2\n", "min = \"2\"\n")), "F:16: 'min' must be a number, got a string");
}

TEST_F(LessonFile, BadValuesAreNamed) {
  EXPECT_EQ(error(good_with("id = \"09-sample\"", "id = \"09-other\"")),
            "F:1: id '09-other' must be the file's name without .toml ('09-sample')");
  EXPECT_EQ(error(good_with("rank = 0 }", "rnk = 0 }")).substr(0, 56),
            "F:35: [[chapters]] 1 trigger: unknown key 'rnk' (expecte");
  EXPECT_EQ(error(good_with("type = \"transfer\"", "type = \"transfers\"")).substr(0, 60),
            "F:35: [[chapters]] 1 trigger: type must be one of: span, ins");
  EXPECT_EQ(error(good_with("snippet_line = 2", "snippet_line = 3")),
            "F:36: [[chapters]] 1 snippet_line must be 1 to 2 (the snippet's lines), got 3");
  EXPECT_EQ(error(good_with("chapter = 1", "chapter = 2")), "F:40: question 1 chapter must be 1 to 1, got 2");
  EXPECT_EQ(error(good_with("count(type=transfer)", "count(type=transfer")),
            "F:42: lesson 09-sample, question 1: answer column 20: expected ',' or ')' at the end");
  EXPECT_EQ(error(good_with("default = 4", "default = 5")),
            "F:19: default: --devices must be a number from 2 to 8 in steps of 2, got '5'");
  EXPECT_EQ(error(good_with("default = \"ring\"", "default = \"star\"")),
            "F:25: default: --algo must be one of: ring, tree; got 'star'");
  EXPECT_EQ(error(good_with("tolerance = 0\n", "tolerance = 2\n")),
            "F:44: question 1 tolerance is relative: 0 to below 1, got 2");
  EXPECT_EQ(error(good_with("minutes = 5", "minutes = 0")), "F:3: minutes must be 1 to 240, got 0");
}

TEST_F(LessonFile, ScenarioRules) {
  EXPECT_EQ(error(good_with("args = [\"train\",", "args = [\"frobnicate\",")),
            "F:11: [scenario] args must start with \"train\" or \"bench\" (a dpscope command line) or "
            "\"launch\" (a PyTorch script)");
  EXPECT_EQ(error(good_with("\"--steps\", \"2\"]", "\"--steps\", \"2\", \"--trace\", \"x\"]")),
            "F:11: [scenario] args must not give --trace: the lesson chooses where the trace goes");
  EXPECT_EQ(error(good_with("\"--steps\", \"2\"]", "\"--steps\", \"2\", \"--devices\", \"4\"]")),
            "F:14: --devices is a knob: leave it out of [scenario] args (its default applies)");
}

// [scenario] expect_error declares a run that fails (lesson 13): optional, a non-empty string.
TEST_F(LessonFile, ExpectErrorDeclaresAFailingScenario) {
  EXPECT_EQ(load(kGood).expect_error, "");
  const std::string declared =
      good_with("args = [\"train\", \"--steps\", \"2\"]",
                "args = [\"train\", \"--steps\", \"2\"]\nexpect_error = \"Detected mismatch\"");
  EXPECT_EQ(load(declared).expect_error, "Detected mismatch");
  EXPECT_EQ(error(good_with("args = [\"train\", \"--steps\", \"2\"]",
                            "args = [\"train\", \"--steps\", \"2\"]\nexpect_error = \"\"")),
            "F:12: [scenario] expect_error must be a part of the error message the run ends with, not empty");
  EXPECT_EQ(error(good_with("args = [\"train\", \"--steps\", \"2\"]",
                            "args = [\"train\", \"--steps\", \"2\"]\nexpect_error = 3")),
            "F:12: 'expect_error' must be a string, got an integer");
}

TEST_F(LessonFile, TomlSyntaxErrorsNameTheLine) {
  const std::string message = error(good_with("minutes = 5", "minutes = = 5"));
  EXPECT_TRUE(message.starts_with("F:3: ")) << message;
}

TEST_F(LessonFile, MissingFileIsAnIoError) {
  try {
    load_lesson(dir_ / "nope.toml");
    FAIL() << "loaded a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_EQ(std::string(e.what()), "lesson " + (dir_ / "nope.toml").string() + ": no such file");
  }
}

// ---- hostile lesson files ----

TEST_F(LessonFile, SizeAndNestingAreBoundedBeforeTomlParses) {
  EXPECT_EQ(error(kGood + "# " + std::string(kMaxLessonFileBytes, 'x') + "\n").substr(0, 30),
            "F: the file is 1049247 bytes; ");
  std::string dotted = "a";
  for (int i = 0; i < 50000; ++i) dotted += ".a";  // once: SIGSEGV in toml++
  EXPECT_EQ(error("id = \"09-sample\"\n" + dotted + " = 1\n"), "F:2: a dotted key has more than 16 parts");
  EXPECT_EQ(error("id = \"09-sample\"\n[" + dotted + "]\n"), "F:2: a dotted key has more than 16 parts");
  EXPECT_EQ(error("x = " + std::string(33, '[') + std::string(33, ']')),
            "F:1: arrays, tables and inline tables nest more than 32 levels deep");
  EXPECT_EQ(error("x = " + std::string(33, '{') + std::string(33, '}')),
            "F:1: arrays, tables and inline tables nest more than 32 levels deep");
  // Dots and brackets inside strings and comments are text, not keys.
  const std::string dots = "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ {{{{";
  EXPECT_EQ(load(good_with("title = \"A sample\"", "title = \"" + dots + "\" # " + dots)).title, dots);
  // (In a narration "{{" opens a placeholder: the brackets alone there.)
  const std::string brackets = dots.substr(0, dots.find(" {{"));
  EXPECT_EQ(
      load(good_with("narration = \"Look.\"", "narration = '''" + brackets + "'''")).chapters[0].narration,
      brackets);
  EXPECT_EQ(
      error(good_with("answer = \"count(type=transfer)\"",
                      "answer = \"" + std::string(2000, '(') + "1" + std::string(2000, ')') + "\"")),
      "F:42: lesson 09-sample, question 1: answer column 257: the expression nests more than 256 levels deep "
      "(parentheses, '-' signs and operators in a row each add one)");
}

TEST_F(LessonFile, ScenarioWritesOnlyInsideItsScratchDirectory) {
  auto with_args = [](const std::string& tail) {
    return good_with("\"--steps\", \"2\"]", "\"--steps\", \"2\"" + tail + "]");
  };
  EXPECT_EQ(
      error(with_args(R"(, "--save", "/abs/victim.safetensors")")),
      "F:11: [scenario] args: --save '/abs/victim.safetensors' writes outside the lesson's scratch "
      "directory: a "
      "scenario writes only inside {scratch} (e.g. \"{scratch}/model.safetensors\", \"{scratch}/ckpt\")");
  EXPECT_EQ(error(with_args(R"(, "--checkpoint-dir", "{scratch}/../../victimdir")")).substr(0, 103),
            "F:11: [scenario] args: --checkpoint-dir '{scratch}/../../victimdir' writes outside the lesson's "
            "scratch");
  EXPECT_NE(error(with_args(R"(, "--save={scratch}/../w")")).find("--save '{scratch}/../w' writes outside"),
            std::string::npos);
  EXPECT_NE(
      error(with_args(R"(, "--trace-dir", "{scratch}x")")).find("--trace-dir '{scratch}x' writes outside"),
      std::string::npos);
  EXPECT_NE(error(with_args(R"(, "--save", "w.safetensors")")).find("--save 'w.safetensors' writes outside"),
            std::string::npos);
  EXPECT_EQ(error(with_args(R"(, "--save")")), "F:11: [scenario] args: --save needs a path after it");
  // Inputs may be anywhere, but never what the scenario writes.
  EXPECT_EQ(error(with_args(R"(, "--init", "{scratch}/w", "--save", "{scratch}/./w")")),
            "F:11: [scenario] args: --init '{scratch}/w' is also written by --save '{scratch}/./w': a "
            "scenario must "
            "not read what it writes");
  EXPECT_NE(error(with_args(R"(, "--data", "/d/x.npy,{scratch}/c/y.npy", "--checkpoint-dir", "{scratch}/c")"))
                .find("--data '{scratch}/c/y.npy' is also written by --checkpoint-dir '{scratch}/c'"),
            std::string::npos);
  const Lesson ok = load(with_args(
      R"(, "--save", "{scratch}/w.safetensors", "--checkpoint-dir", "{scratch}/ckpt/../ckpt2", "--init", "/data/w0")"));
  EXPECT_EQ(ok.scenario.size(), 9u);
  // Knobs cannot choose a file, nor sneak a flag in as a value.
  EXPECT_EQ(error(good_with("flag = \"--algo\"", "flag = \"--save\"")),
            "F:22: knob flag --save cannot be a knob: it names a file, which a student must not choose");
  EXPECT_EQ(error(good_with("[\"ring\", \"tree\"]", "[\"ring\", \"--save=/x\"]")),
            "F:24: knob --algo: choice '--save=/x' starts with '-': it would be read as a flag");
}

// A PyTorch scenario (lesson 14; lesson/torch_scenario.hpp) loads with its own rules, and
// `{lesson-scratch}` lets a comparison run read what the lesson's own run wrote, never write there.
TEST_F(LessonFile, APyTorchScenarioAndWhatItsComparisonsMayRead) {
  const std::string torch = R"(args = ["launch", "--nproc", "2", "--", "python3", "-m", "dpscope_torch.run",
        "examples/pytorch/ddp_tutorial.py", "--export", "{scratch}/same"])";
  const Lesson lesson = load(good_with("args = [\"train\", \"--steps\", \"2\"]", torch));
  EXPECT_EQ(lesson.scenario.size(), 10u);
  EXPECT_EQ(lesson.scenario[0], "launch");
  EXPECT_EQ(error(good_with("args = [\"train\", \"--steps\", \"2\"]",
                            R"(args = ["launch", "--nproc", "2", "--", "python3", "-m", "dpscope_torch.run",
        "/tmp/mine.py"])")),
            "F:11: [scenario] args: the script '/tmp/mine.py' must be one of dpscope's examples, "
            "examples/pytorch/NAME.py (NAME: lower-case letters, digits, '_')");
  EXPECT_EQ(error(good_with("args = [\"train\", \"--steps\", \"2\"]", "args = [\"frobnicate\"]")),
            "F:11: [scenario] args must start with \"train\" or \"bench\" (a dpscope command line) or "
            "\"launch\" (a PyTorch script)");
  const std::string other = "\n[[scenarios]]\nname = \"sim\"\nargs = [\"train\", \"--steps\", \"1\", ";
  const auto with_other = [&](const std::string& tail) {
    return good_with("[[knobs]]\nflag = \"--devices\"",
                     other + tail + "]\n\n[[knobs]]\nflag = \"--devices\"");
  };
  const Lesson reads = load(with_other(R"("--init", "{lesson-scratch}/same/init.safetensors")"));
  EXPECT_EQ(reads.scenarios.at(0).args.back(), "{lesson-scratch}/same/init.safetensors");
  EXPECT_NE(
      error(with_other(R"("--save", "{lesson-scratch}/w.safetensors")"))
          .find("--save '/{lesson-scratch}/w.safetensors' writes outside the lesson's scratch directory"),
      std::string::npos);
  EXPECT_EQ(
      error(good_with("\"--steps\", \"2\"]", "\"--steps\", \"2\", \"--init\", \"{lesson-scratch}/w\"]")),
      "F:11: [scenario] args: {lesson-scratch} is for [[scenarios]]: the lesson's own scenario writes and "
      "reads {scratch}");
}

// Every `train` and `bench` option whose help says it writes is an output the sandbox checks: a new
// flag that writes (a log, a profile) cannot slip past it. Read from the commands' source, where each
// option is registered with its help text.
TEST(ScenarioSandbox, EveryOptionThatWritesIsChecked) {
  for (const char* name : {"train_cmd.cpp", "bench_cmd.cpp"}) {
    const std::string source =
        testing::read_file(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "runtime/cli" / name);
    int options = 0;
    for (size_t at = source.find("add_option("); at != std::string::npos;
         at = source.find("add_option(", at + 1)) {
      const size_t quote = source.find('"', at);
      const std::string spelling = source.substr(quote + 1, source.find('"', quote + 1) - quote - 1);
      const size_t end = std::min(source.find("add_", at + 1), source.find(';', at));
      const std::string help = source.substr(at, end - at);
      ++options;
      if (help.find("write") == std::string::npos) continue;
      std::istringstream names(spelling);  // "-o,--out": every spelling
      bool checked = false;
      for (std::string n; std::getline(names, n, ',');)
        for (std::string_view flag : kScenarioOutputFlags) checked = checked || n == flag;
      EXPECT_TRUE(checked) << name << ": option " << spelling
                           << " writes a file: add it to kScenarioOutputFlags (lesson/lesson.hpp)";
    }
    EXPECT_GT(options, 5) << name;
  }
}

// The same rule on the file system: symbolic links and `..` are resolved on both sides.
TEST_F(LessonFile, SandboxResolvesLinksOnDisk) {
  const std::filesystem::path outside = dir_ / "outside";
  const std::filesystem::path real = dir_ / "real";
  std::filesystem::create_directories(outside);
  std::filesystem::create_directories(real / "scratch");
  std::filesystem::create_directory_symlink(outside, real / "scratch" / "escape");
  std::filesystem::create_directory_symlink(real, dir_ / "link");
  const std::filesystem::path scratch = dir_ / "link" / "scratch";  // reached through a link itself
  EXPECT_EQ(scenario_sandbox_problem({"train", "--save", "{scratch}/w"}, scratch, true), "");
  EXPECT_EQ(scenario_sandbox_problem({"train", "--save", (real / "scratch" / "w").string()}, scratch, true),
            "");
  EXPECT_NE(scenario_sandbox_problem({"train", "--save", "{scratch}/escape/w"}, scratch, true), "");
  EXPECT_NE(scenario_sandbox_problem({"train", "--checkpoint-dir", "{scratch}/.."}, scratch, true), "");
  EXPECT_NE(
      scenario_sandbox_problem({"train", "--save", (dir_ / "link" / "scratchy").string()}, scratch, true),
      "");  // a prefix of the name is not a component
}

// A NUL would cut an argument short on the command line behind the sandbox's back ("--save\0x" is
// "--save" to the parser); an escape sequence would drive the terminal.
TEST_F(LessonFile, StringsHoldNoControlCharacters) {
  EXPECT_EQ(error(good_with("\"--steps\", \"2\"]", R"("--steps", "2", "--save\u0000x", "/abs/victim"])")),
            "F:11: 'args' holds the control character U+0000: only newlines and tabs are allowed");
  EXPECT_EQ(error(good_with("title = \"A sample\"", R"(title = "A \u001b[2J sample")")),
            "F:2: 'title' holds the control character U+001B: only newlines and tabs are allowed");
  EXPECT_EQ(load(good_with("narration = \"Look.\"", R"(narration = "Look\there.\n")")).chapters[0].narration,
            "Look\there.\n");
}

TEST_F(LessonFile, HelpAndVersionFlagsAreRefused) {
  for (const std::string flag : {"--help", "-h", "--help-all", "--version", "--help=x"}) {
    EXPECT_EQ(error(good_with("\"--steps\", \"2\"]", "\"--steps\", \"2\", \"" + flag + "\"]")),
              "F:11: [scenario] args must not give " + flag +
                  ": it prints help or the version instead of running the scenario");
  }
  EXPECT_EQ(error(good_with("flag = \"--zero\"", "flag = \"--help\"")),
            "F:28: knob flag --help cannot be a knob: it prints help or the version instead of running");
}

TEST_F(LessonFile, KnobsGiveABoundedNumberOfSaneValues) {
  EXPECT_EQ(error(good_with("default = \"ring\"", "default = \"ring\"\nmin = 1")),
            "F:24: knob --algo: give either choices or min/max/step, not both");
  EXPECT_EQ(error(good_with("switch = true", "switch = true\nchoices = [\"a\"]")),
            "F:30: knob --zero: a switch has no min, max, step or choices");
  EXPECT_EQ(
      error(good_with("max = 8", "max = 9223372036854775807")),
      "F:17: knob --devices: max must be a finite number from -1e+09 to 1e+09, got 9.223372036854776e+18");
  EXPECT_EQ(error(good_with("max = 8", "max = inf")),
            "F:17: knob --devices: max must be a finite number from -1e+09 to 1e+09, got inf");
  EXPECT_EQ(error(good_with("min = 2", "min = nan")),
            "F:16: knob --devices: min must be a finite number from -1e+09 to 1e+09, got nan");
  EXPECT_EQ(error(good_with("step = 2", "step = 1e-300")),
            "F:18: knob --devices: step must be at least 1e-06, got 1e-300");
  EXPECT_EQ(error(good_with("step = 2", "step = -1")),
            "F:18: knob --devices: step must be at least 1e-06, got -1");
  EXPECT_EQ(error(good_with("max = 8", "max = 100000")),
            "F:18: knob --devices: min 2 to max 100000 in steps of 2 gives 50000 values; at most 1000");
  EXPECT_EQ(error(good_with("max = 8", "max = 1")), "F:17: knob --devices: needs min <= max, got 2 > 1");
  EXPECT_EQ(error(good_with("[\"ring\", \"tree\"]", "[\"ring\", \"ring\"]")),
            "F:24: knob --algo: choice 'ring' is given twice");
  EXPECT_EQ(error(good_with("[\"ring\", \"tree\"]", "[\"ring\", \"a b\"]")),
            "F:24: knob --algo: choice 'a b' holds a space or a control character");
  EXPECT_EQ(error(good_with("flag = \"--algo\"", "flag = \"--Algo;x\"")),
            "F:22: knob flag '--Algo;x' must be --NAME (lower-case letters, digits and '-')");
}

TEST_F(LessonFile, CountsAreBounded) {
  std::string many = "goals = [";
  for (size_t i = 0; i <= kMaxGoals; ++i) many += "\"g\", ";
  EXPECT_EQ(error(good_with("goals = [\"one\", \"two\"]", many + "]")),
            "F:4: 'goals' has 33 items; a lesson has at most 32");
  std::string chapters;
  for (size_t i = 0; i < kMaxChapters; ++i)  // kGood has one already
    chapters +=
        "[[chapters]]\ntitle = \"t\"\ntrigger = { type = \"span\" }\nsnippet_line = 1\nnarration = \"n\"\n";
  EXPECT_EQ(error(kGood + chapters), "F:33: 'chapters' has 65 items; a lesson has at most 64");
}

// A number knob's value is a plain decimal number, as the command line reads it; on a grid of whole
// numbers, written as one ("4.0" once reached the scenario's integer flag and failed the run there).
TEST_F(LessonFile, NumberKnobValuesAreDecimal) {
  const Lesson l = load(kGood);
  EXPECT_EQ(l.knobs[0].check("4"), "");
  EXPECT_EQ(l.knobs[0].check("4.0"), "--devices takes whole numbers: write '4', not '4.0'");
  EXPECT_EQ(l.knobs[0].check("4e0"), "--devices takes whole numbers: write '4', not '4e0'");
  for (const std::string value : {" 4", "0x4", "+4", "inf", "nan", "4 ", ""})
    EXPECT_EQ(l.knobs[0].check(value),
              "--devices must be a number from 2 to 8 in steps of 2, got '" + value + "'");
}

TEST_F(LessonFile, ATriggerMustSelectEvents) {
  EXPECT_EQ(
      error(good_with("{ type = \"transfer\", algo_step = 1, rank = 0 }", "{}")),
      "F:35: [[chapters]] 1 trigger is empty and matches every event: name at least one of its keys (type, "
      "name, category, rank, step, ...)");
  EXPECT_EQ(error(good_with("{ type = \"transfer\", algo_step = 1, rank = 0 }", "{ nth = 3 }")).substr(0, 59),
            "F:35: [[chapters]] 1 trigger has only nth and matches every");
}

// A lesson path is looked at with stat() before it is opened: a directory and a missing file are named
// as such, and a FIFO is refused at once (opening one for reading would wait for a writer forever).
TEST_F(LessonFile, PathsThatAreNoLessonFileSayWhatTheyAre) {
  auto io_error = [](const std::filesystem::path& path) -> std::string {
    try {
      load_lesson(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo);
      return e.what();
    }
    return "(loaded)";
  };
  EXPECT_EQ(io_error(dir_), "lesson " + dir_.string() +
                                " is a directory, not a lesson file: give a directory of " +
                                "lessons as --lessons-dir " + dir_.string());
  const std::filesystem::path fifo = dir_ / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(io_error(fifo), "lesson " + fifo.string() + " is a FIFO (named pipe), not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(io_error(dir_ / "no" / "such.toml"),
            "lesson " + (dir_ / "no" / "such.toml").string() + ": no such file");
  testing::write_file(dir_ / "file", "x");
  try {
    lesson_files(dir_ / "file");
    ADD_FAILURE() << "listed a file as a directory";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "lessons directory " + (dir_ / "file").string() +
                  " is not a directory (a file: give it as the lesson, not --lessons-dir)");
  }
}

TEST_F(LessonFile, AKnobIsTurnedOnce) {
  const Lesson l = load(kGood);
  try {
    scenario_args(l, {{"devices", "4"}, {"--devices", "6"}});
    ADD_FAILURE() << "turned a knob twice";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_EQ(std::string(e.what()),
              "lesson 09-sample: knob --devices is turned twice (--devices and devices); give it once");
  }
}

TEST_F(LessonFile, LessonFilesAreSortedTomlFilesOnly) {
  testing::write_file(dir_ / "b.toml", "");
  testing::write_file(dir_ / "a.toml", "");
  testing::write_file(dir_ / "README.md", "");
  const auto files = lesson_files(dir_);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].filename(), "a.toml");
  EXPECT_EQ(files[1].filename(), "b.toml");
}

}  // namespace
}  // namespace dpscope::lesson

namespace dpscope::lesson {
namespace {

// The lesson format's checked items: placeholders, expect, [[scenarios]] and [[exercises]] are checked when
// the lesson loads, each mistake one line naming the lesson and the item.
TEST_F(LessonFile, PlaceholdersExpectScenariosAndExercisesLoad) {
  const Lesson l = load(good_with("narration = \"Look.\"",
                                  "narration = \"{{ devices | words }} GPUs, {{! 25 MiB }}.\"\n"
                                  "expect = [\"count(type=transfer, at=started) >= 1\"]") +
                        "\n[[scenarios]]\nname = \"one-gpu\"\nargs = [\"train\", \"--steps\", \"1\"]\n"
                        "knobs = [\"devices\"]\n"
                        "\n[[exercises]]\nprompt = \"With {{ devices }}?\"\nknobs = { devices = 6 }\n"
                        "answer = \"count(type=transfer)\"\nunit = \"\"\n");
  ASSERT_EQ(l.chapters[0].expect.size(), 1u);
  EXPECT_TRUE(l.chapters[0].expect[0].condition.needs_moment());
  EXPECT_TRUE(l.chapters[0].narration_text.has_placeholders());
  ASSERT_EQ(l.scenarios.size(), 1u);
  EXPECT_EQ(l.scenarios[0].knobs, std::vector<std::string>{"--devices"});
  EXPECT_EQ(other_scenario_args(l, l.scenarios[0], {{"devices", "6"}}),
            (std::vector<std::string>{"train", "--steps", "1", "--devices", "6"}));
  ASSERT_EQ(l.exercises.size(), 1u);
  EXPECT_EQ(l.exercises[0].knobs, (std::map<std::string, std::string>{{"--devices", "6"}}));
}

TEST_F(LessonFile, BadPlaceholdersExpectsScenariosAndExercisesAreNamed) {
  EXPECT_EQ(
      error(good_with("narration = \"Look.\"", "narration = \"Look at {{ devices | furlongs }}.\"")),
      "F:37: lesson 09-sample, chapter 1 'Start': narration: placeholder 1 '{{ devices | furlongs }}': "
      "unknown format 'furlongs' (expected one of: us, ms, time, bytes, int, words, x, pct, f1, f2, f3, "
      "ordinal)");
  EXPECT_EQ(error(good_with("prompt = \"How many?\"", "prompt = \"How many on {{ @dp(devices) }}?\"")),
            "F:41: lesson 09-sample, question 1: prompt: '@dp' names no [[scenarios]] of the lesson");
  EXPECT_EQ(
      error(good_with("narration = \"Look.\"", "narration = \"Look.\"\nexpect = [\"count(rnk=0) == 1\"]")),
      "F:38: lesson 09-sample, chapter 1 'Start': expect 'count(rnk=0) == 1': column 7: unknown key 'rnk' "
      "(expected one of: type, name, category, rank, step, phase, stream, algo, algo_step, chunk, coll, "
      "param, bucket, when, nth, at)");
  EXPECT_EQ(error(good_with("trigger = { type = \"transfer\", algo_step = 1, rank = 0 }",
                            "trigger = { type = \"transfer\", at = \"started\" }")),
            "F:35: [[chapters]] 1 trigger: at= reads a chapter's moment; a trigger makes one");
  EXPECT_EQ(
      error(kGood + "\n[[exercises]]\nprompt = \"?\"\nknobs = { devices = 9 }\nanswer = \"devices\"\n"
                    "unit = \"\"\n"),
      "F:49: lesson 09-sample, exercise 1: --devices must be a number from 2 to 8 in steps of 2, got '9'");
  EXPECT_EQ(error(kGood + "\n[[exercises]]\nprompt = \"?\"\nknobs = { batch = 9 }\nanswer = \"devices\"\n"
                          "unit = \"\"\n"),
            "F:49: lesson 09-sample, exercise 1: 'batch' is no knob of the lesson");
  EXPECT_EQ(error(kGood + "\n[[scenarios]]\nname = \"One GPU\"\nargs = [\"train\"]\n"),
            "F:48: [[scenarios]] 1 name 'One GPU' must be lower-case letters, digits and '-'");
  EXPECT_EQ(error(kGood + "\n[[scenarios]]\nname = \"x\"\nargs = [\"train\", \"--trace\", \"t.jsonl\"]\n"),
            "F:49: [[scenarios]] 1 args must not give --trace: the lesson chooses where the trace goes");
}

}  // namespace
}  // namespace dpscope::lesson

namespace dpscope::lesson {
namespace {

// A chapter's `compare` names 2 to 4 distinct runs, each "main" (the lesson's own) or a
// [[scenarios]] name; every other list is one line naming FILE:LINE.
TEST_F(LessonFile, CompareNamesTwoToFourRunsOfTheLesson) {
  const std::string one_gpu = "\n[[scenarios]]\nname = \"one-gpu\"\nargs = [\"train\", \"--steps\", \"1\"]\n";
  auto with = [&](const std::string& compare) {
    return good_with("narration = \"Look.\"", "narration = \"Look.\"\ncompare = " + compare) + one_gpu;
  };
  const Lesson l = load(with("[\"one-gpu\", \"main\"]"));
  EXPECT_EQ(l.chapters[0].compare, (std::vector<std::string>{"one-gpu", "main"}));
  EXPECT_EQ(l.chapters[0].compare_line, 38);
  EXPECT_TRUE(load(kGood).chapters[0].compare.empty());
  EXPECT_EQ(
      error(with("[\"main\", \"dp\"]")),
      "F:38: [[chapters]] 1 compare: 'dp' is no run of the lesson (runs: main, one-gpu; \"main\" is the "
      "lesson's own)");
  EXPECT_EQ(error(with("[]")),
            "F:38: [[chapters]] 1 compare must name 2 to 4 runs to show side by side, got 0");
  EXPECT_EQ(error(with("[\"main\"]")),
            "F:38: [[chapters]] 1 compare must name 2 to 4 runs to show side by side, got 1");
  EXPECT_EQ(error(with("[\"main\", \"one-gpu\", \"main\", \"one-gpu\", \"main\"]")),
            "F:38: [[chapters]] 1 compare must name 2 to 4 runs to show side by side, got 5");
  EXPECT_EQ(error(with("[\"main\", \"main\"]")), "F:38: [[chapters]] 1 compare: 'main' is named twice");
  EXPECT_EQ(error(with("\"main\"")), "F:38: 'compare' must be an array, got a string");
  EXPECT_EQ(error(with("[\"main\", 3]")), "F:38: 'compare' must be a string, got an integer");
}

}  // namespace
}  // namespace dpscope::lesson
