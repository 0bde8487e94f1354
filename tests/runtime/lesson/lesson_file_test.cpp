// Lesson files (lesson/lesson.hpp): a complete file loads field by field, and every kind of mistake
// is one error naming FILE:LINE and the key.
#include "dpscope/lesson/lesson.hpp"

#include <gtest/gtest.h>

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
  EXPECT_EQ(
      error(good_with("minutes = 5", "minutes = 5\ntitel = \"x\"")),
      "F:4: unknown key 'titel' in the lesson (expected one of: id, title, goals, minutes, scenario, knobs, "
      "snippet, chapters, questions)");
  EXPECT_EQ(error(good_with("narration = \"Look.\"", "narration = \"Look.\"\nnarative = 1")),
            "F:38: unknown key 'narative' in [[chapters]] 1 (expected one of: title, trigger, narration, "
            "snippet_line)");
  EXPECT_EQ(
      error(good_with("unit = \"transfers\"", "unit = \"transfers\"\nunits = \"x\"")),
      "F:44: unknown key 'units' in question 1 (expected one of: chapter, prompt, answer, unit, tolerance, "
      "explain)");
  EXPECT_EQ(error(good_with("step = 2\n", "step = 2\nstride = 1\n")),
            "F:19: unknown key 'stride' in [[knobs]] (expected one of: flag, label, min, max, step, choices, "
            "switch, default)");
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
            "F:11: [scenario] args must start with \"train\" or \"bench\" (a dpscope command line)");
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
