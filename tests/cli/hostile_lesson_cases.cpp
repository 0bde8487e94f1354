// Hostile-input rows, lesson files and their scenarios: expressions, sandboxed outputs, lesson
// check. Each row writes a small lesson into its scratch directory (lesson_text() below: a one-step run
// on one simulated GPU) with one hostile part, and names the file by its path. docs/reliability.md,
// "Lessons", lists the promises these rows prove.
#include <sys/stat.h>

#include <algorithm>

#include "cli/hostile_input.hpp"

namespace dpscope::testing {

namespace {

// The parts of a lesson a row may replace.
struct LessonParts {
  std::string id = "01-hostile";
  std::string args_tail;  // appended to the scenario's args: `, "--save", "x"`
  std::string knobs;      // [[knobs]] tables
  std::string trigger = R"({ type = "span" })";
  std::string answer = "count(type=span)";
  std::string narration = "Look.";  // a TOML literal string: no escapes
  std::string extra;                // appended tables ([[scenarios]], [[exercises]])
};

std::string lesson_text(const LessonParts& p) {
  return "id = \"" + p.id +
         "\"\ntitle = \"Hostile\"\nminutes = 1\ngoals = [\"none\"]\nsnippet = \"x = 1\\n\"\n\n"
         "[scenario]\nargs = [\"train\", \"--dataset\", \"spirals:64\", \"--model\", \"2-8-3\", \"--batch\", "
         "\"16\", "
         "\"--seed\", \"1\", \"--steps\", \"1\"" +
         p.args_tail + "]\n\n" + p.knobs + "\n\n[[chapters]]\ntitle = \"Start\"\ntrigger = " + p.trigger +
         "\nsnippet_line = 1\nnarration = '''" + p.narration +
         "'''\n\n[[questions]]\nchapter = 1\nprompt = \"How many?\"\n"
         "answer = \"" +
         p.answer + "\"\nunit = \"bytes\"\n" + p.extra;
}

// A setup that writes the lesson {dir}/01-hostile.toml; `parts` may name the directory as {dir}.
std::function<void(const fs::path&, const Fixtures&)> writes(LessonParts parts) {
  return [parts](const fs::path& d, const Fixtures&) {
    LessonParts p = parts;
    p.args_tail = replace_all(p.args_tail, "{dir}", d.string());
    p.narration = replace_all(p.narration, "{dir}", d.string());
    p.extra = replace_all(p.extra, "{dir}", d.string());
    write_file(d / "01-hostile.toml", lesson_text(p));
  };
}

LessonParts with_answer(const std::string& answer) {
  LessonParts p;
  p.answer = answer;
  return p;
}
LessonParts with_narration(const std::string& narration) {
  LessonParts p;
  p.narration = narration;
  return p;
}
LessonParts with_extra(const std::string& extra) {
  LessonParts p;
  p.extra = extra;
  return p;
}
LessonParts with_args(const std::string& tail) {
  LessonParts p;
  p.args_tail = tail;
  return p;
}
LessonParts with_knob(const std::string& knob) {
  LessonParts p;
  p.knobs = "[[knobs]]\n" + knob + "\n";
  return p;
}

const std::string kVictim = "precious bytes";

// The victim file {dir}/victim.safetensors exists before the run and keeps its bytes.
void make_victim(const fs::path& d) { write_file(d / "victim.safetensors", kVictim); }
void victim_untouched(const fs::path& d, const Fixtures&) {
  EXPECT_EQ(read_file(d / "victim.safetensors"), kVictim) << "the lesson's scenario overwrote the victim";
}

// Nothing but the lesson file (and what the row made itself) is in {dir}: no checkpoint, trace or
// directory written outside the scratch directory.
std::function<void(const fs::path&, const Fixtures&)> only(std::vector<std::string> names) {
  return [names](const fs::path& d, const Fixtures&) {
    for (const auto& entry : fs::directory_iterator(d)) {
      const std::string name = entry.path().filename().string();
      EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << "written outside the scratch "
                                                                             "directory: "
                                                                          << entry.path();
    }
  };
}

void make_fifo(const fs::path& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path; }

const std::string kDeepParens = std::string(20000, '(') + "1" + std::string(20000, ')');
const std::string kManyMinus = std::string(200000, '-') + "1";

}  // namespace

std::vector<Case> hostile_lesson_cases() {
  const std::string file = "{dir}/01-hostile.toml";
  return {
      // ---- 0. a scenario's run is bounded in time: 100,000,000 steps ran for ever (the trace growing
      // 1.3 MB/s) in lesson run, lesson check and the viewer's lesson mode. The limit, 300 s, is
      // lowered for the row by DPSCOPE_LESSON_RUN_LIMIT_S. ----
      {"LessonScenarioRunsPastItsLimit",
       "lesson run " + file + " --no-viz --out {dir}/out",
       2,
       "the lesson's scenario ran past 2 s: a lesson's run is bounded",
       [](const fs::path& d, const Fixtures&) {
         write_file(d / "01-hostile.toml",
                    replace_all(lesson_text({}), R"("--steps", "1")", R"("--steps", "100000000")"));
       },
       {{"DPSCOPE_LESSON_RUN_LIMIT_S", "2"}}},
      {"LessonCheckScenarioRunsPastItsLimit",
       "lesson check " + file,
       1,
       "the lesson's scenario ran past 2 s",
       [](const fs::path& d, const Fixtures&) {
         write_file(d / "01-hostile.toml",
                    replace_all(lesson_text({}), R"("--steps", "1")",
                                R"("--steps", "100000000", "--mode", "ddp", "--devices", "2")"));
       },
       {{"DPSCOPE_LESSON_RUN_LIMIT_S", "2"}}},
      // Two files of one number: `lesson run 1` took the first in name order without a word.
      {"LessonNumberSharedByTwoFiles", "lesson run 1 --lessons-dir {dir} --no-viz --out {dir}/out", 2,
       "lesson 1 is ambiguous in {dir}: 01-alpha, 01-hostile share its number; give the id",
       [](const fs::path& d, const Fixtures&) {
         write_file(d / "01-hostile.toml", lesson_text({}));
         LessonParts alpha;
         alpha.id = "01-alpha";
         write_file(d / "01-alpha.toml", lesson_text(alpha));
       }},
      // ---- 1. bounded input: nesting, length, file size (each once crashed with SIGSEGV) ----
      {"LessonAnswerDeepParenthesesCheck", "lesson check " + file, 2,
       "01-hostile.toml:21: lesson 01-hostile, question 1: answer is 40001 characters long; at most 4096",
       writes(with_answer(kDeepParens))},
      {"LessonAnswerDeepParenthesesRun", "lesson run " + file + " --no-viz --out {dir}/out", 2,
       "answer is 40001 characters long; at most 4096", writes(with_answer(kDeepParens))},
      {"LessonAnswerDeepParenthesesHandout", "lesson handout " + file + " {dir}/out --no-png", 2,
       "answer is 40001 characters long; at most 4096", writes(with_answer(kDeepParens))},
      {"LessonAnswerManyMinusSigns", "lesson check " + file, 2,
       "answer is 200001 characters long; at most 4096", writes(with_answer(kManyMinus))},
      {"LessonAnswerNestedPastTheDepthLimit", "lesson check " + file, 2,
       "answer column 257: the expression nests more than 256 levels deep",
       writes(with_answer(std::string(1000, '(') + "1" + std::string(1000, ')')))},
      {"LessonAnswerLongOperatorChain", "lesson check " + file, 2,
       "the expression nests more than 256 levels deep",
       writes(with_answer("1" + replace_all(std::string(300, '+'), "+", "+1")))},
      {"LessonFileOverOneMebibyte", "lesson check " + file, 2,
       "a lesson file is at most 1048576 bytes (1 MiB)",
       [](const fs::path& d, const Fixtures&) {
         write_file(d / "01-hostile.toml", lesson_text({}) + "# " + std::string(2 << 20, 'x') + "\n");
       }},
      {"LessonDottedKeyTooDeep", "lesson check " + file, 2,
       "01-hostile.toml:2: a dotted key has more than 16 parts",
       [](const fs::path& d, const Fixtures&) {
         std::string deep;
         for (int i = 0; i < 200000; ++i) deep += "a.";
         write_file(d / "01-hostile.toml", "id = \"01-hostile\"\n" + deep + "b = 1\n");
       }},
      {"LessonArraysNestedTooDeep", "lesson check " + file, 2, "nest more than 32 levels deep",
       [](const fs::path& d, const Fixtures&) {
         write_file(d / "01-hostile.toml",
                    "id = \"01-hostile\"\nx = " + std::string(20000, '[') + std::string(20000, ']') + "\n");
       }},
      {"VizLessonAnswerDeepParentheses",
       "--lesson " + file + " --screenshot {dir}/s.png --size 320x200",
       1,
       "answer is 40001 characters long; at most 4096",
       writes(with_answer(kDeepParens)),
       {},
       {},
       kViz},

      // Placeholders in the text are expressions under the same bounds.
      {"LessonPlaceholderNestedPastTheDepthLimit", "lesson check " + file, 2,
       "narration: placeholder 1 '{{ ((((",
       writes(with_narration("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"))},
      {"LessonPlaceholderOtherScenariosNestedTooDeep", "lesson check " + file, 2,
       "the expression nests more than 256 levels deep",
       writes(with_narration("{{ " + replace_all(std::string(1000, '@'), "@", "@a(") + "1" +
                             std::string(1000, ')') + " }}"))},
      {"LessonPlaceholderUnterminated", "lesson check " + file, 2, "narration: placeholder 1 ",
       writes(with_narration("{{ count(type=span) " + std::string(5000, 'x')))},

      // ---- 2. a scenario writes only inside its scratch directory ----
      {"LessonScenarioSavesOverAnAbsolutePath",
       "lesson run " + file + " --no-viz --out {dir}/out",
       2,
       "[scenario] args: --save '",
       [](const fs::path& d, const Fixtures& fx) {
         make_victim(d);
         writes(with_args(R"(, "--save", "{dir}/victim.safetensors")"))(d, fx);
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures& fx) {
         victim_untouched(d, fx);
         only({"01-hostile.toml", "victim.safetensors"})(d, fx);
       }},
      {"LessonScenarioCheckpointsEscapeScratch",
       "lesson check " + file + " --out {dir}/out",
       2,
       "--checkpoint-dir '{scratch}/../../victimdir' writes outside the lesson's scratch directory",
       writes(with_args(R"(, "--checkpoint-dir", "{scratch}/../../victimdir")")),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       only({"01-hostile.toml"})},
      {"LessonScenarioSaveWithEquals",
       "lesson check " + file,
       2,
       "/victim.safetensors' writes outside the lesson's scratch directory",
       [](const fs::path& d, const Fixtures& fx) {
         make_victim(d);
         writes(with_args(R"(, "--save={dir}/victim.safetensors")"))(d, fx);
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       victim_untouched},
      // A NUL cuts the argument short on the command line: "--save\0x" reached the parser as --save.
      {"LessonScenarioArgumentWithANul",
       "lesson run " + file + " --no-viz --out {dir}/out",
       2,
       "'args' holds the control character U+0000",
       [](const fs::path& d, const Fixtures& fx) {
         make_victim(d);
         writes(with_args(R"(, "--save\u0000x", "{dir}/victim.safetensors")"))(d, fx);
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       victim_untouched},
      // A command the narration quotes is run by `lesson check`, in the same sandbox.
      {"LessonQuotedCommandSavesOverAnAbsolutePath",
       "lesson check " + file + " --out {dir}/out",
       1,
       "the command it quotes, `dpscope train --dataset spirals:64 --model 2-8-3 --steps 1 --save ",
       [](const fs::path& d, const Fixtures& fx) {
         make_victim(d);
         writes(
             with_narration("Type `dpscope train --dataset spirals:64 --model 2-8-3 --steps 1 --save "
                            "{dir}/victim.safetensors`."))(d, fx);
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       victim_untouched},
      {"LessonOtherScenarioSavesOverAnAbsolutePath",
       "lesson check " + file,
       2,
       "[[scenarios]] 1 args: --save '",
       [](const fs::path& d, const Fixtures& fx) {
         make_victim(d);
         writes(
             with_extra("\n[[scenarios]]\nname = \"x\"\nargs = [\"train\", \"--save\", "
                        "\"{dir}/victim.safetensors\"]\n"))(d, fx);
       },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       victim_untouched},
      {"LessonScenarioRelativeTraceDir", "lesson check " + file, 2,
       "--trace-dir 'traces' writes outside the lesson's scratch directory",
       writes(with_args(R"(, "--trace-dir", "traces")"))},
      {"LessonScenarioReadsWhatItWrites", "lesson check " + file, 2,
       "--init '{scratch}/w.safetensors' is also written by --save '{scratch}/w.safetensors'",
       writes(with_args(R"(, "--init", "{scratch}/w.safetensors", "--save", "{scratch}/w.safetensors")"))},
      {"LessonScenarioDataInsideItsCheckpoints", "lesson check " + file, 2,
       "--data '{scratch}/ckpt/y.npy' is also written by --checkpoint-dir '{scratch}/ckpt'",
       writes(
           with_args(R"(, "--data", "x.npy,{scratch}/ckpt/y.npy", "--checkpoint-dir", "{scratch}/ckpt")"))},
      {"LessonScenarioOutputWithoutValue", "lesson check " + file, 2, "--save needs a path after it",
       writes(with_args(R"(, "--save")"))},
      {"LessonKnobChoosesTheOutput", "lesson check " + file, 2,
       "knob flag --save cannot be a knob: it names a file, which a student must not choose",
       writes(with_knob("flag = \"--save\"\nlabel = \"where\"\nchoices = [\"/tmp/a.safetensors\"]\ndefault = "
                        "\"/tmp/a.safetensors\""))},
      {"LessonKnobChoiceIsAFlag", "lesson check " + file, 2,
       "choice '--save=/tmp/x' starts with '-': it would be read as a flag",
       writes(
           with_knob("flag = \"--algo\"\nlabel = \"a\"\nchoices = [\"ring\", \"--save=/tmp/x\"]\ndefault = "
                     "\"ring\""))},
      {"LessonScenarioInsideScratchRuns",
       "lesson check " + file + " --out {dir}/out",
       0,
       "",
       writes(with_args(R"(, "--save", "{scratch}/w.safetensors", "--checkpoint-dir", "{scratch}/ckpt")")),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures& fx) {
         EXPECT_TRUE(fs::is_regular_file(d / "out" / "01-hostile.scratch" / "w.safetensors"));
         only({"01-hostile.toml", "out"})(d, fx);
       }},

      // ---- 3. help and version flags: one line, the right words ----
      {"LessonScenarioAsksForHelp", "lesson check " + file, 2,
       "01-hostile.toml:8: [scenario] args must not give --help: it prints help or the version instead of "
       "running",
       writes(with_args(R"(, "--help")"))},
      // An empty value is refused in a scenario as on the command line (CLI11 reads '' as 0: lr 0).
      {"LessonScenarioEmptyValue", "lesson check " + file, 1, "--lr: the value is empty: give one",
       writes(with_args(R"(, "--lr", "")"))},
      {"LessonScenarioAsksForTheVersion", "lesson run " + file + " --no-viz --out {dir}/out", 2,
       "[scenario] args must not give --version", writes(with_args(R"(, "--version")"))},
      {"LessonScenarioAsksForShortHelp", "lesson handout " + file + " {dir}/out --no-png", 2,
       "[scenario] args must not give -h", writes(with_args(R"(, "-h")"))},
      {"LessonKnobIsHelp", "lesson check " + file, 2, "knob flag --help cannot be a knob",
       writes(with_knob("flag = \"--help\"\nlabel = \"h\"\nswitch = true\ndefault = \"off\""))},

      // ---- 4. what `lesson check` once accepted silently ----
      {"LessonTriggerEmpty", "lesson check " + file, 2,
       "01-hostile.toml:14: [[chapters]] 1 trigger is empty and matches every event",
       [](const fs::path& d, const Fixtures& fx) {
         LessonParts p;
         p.trigger = "{}";
         writes(p)(d, fx);
       }},
      {"LessonKnobChoiceUnknownPreset", "lesson check " + file, 1,
       "01-hostile.toml:10: knob --preset: choice 'bogus' is no preset (presets: ",
       writes(
           with_knob("flag = \"--preset\"\nlabel = \"GPU\"\nchoices = [\"h100-sxm\", \"bogus\"]\ndefault = "
                     "\"h100-sxm\""))},
      {"LessonKnobRangeAndChoices", "lesson check " + file, 2,
       "knob --lr: give either choices or min/max/step, not both",
       writes(with_knob(
           "flag = \"--lr\"\nlabel = \"lr\"\nmin = 0.1\nmax = 1\nchoices = [\"1\"]\ndefault = \"1\""))},
      {"LessonKnobMaxInt64", "lesson check " + file, 2,
       "knob --lr: max must be a finite number from -1e+09 to 1e+09, got 9.223372036854776e+18",
       writes(with_knob("flag = \"--lr\"\nlabel = \"lr\"\nmin = 0\nmax = 9223372036854775807\ndefault = 1"))},
      {"LessonKnobStepTiny", "lesson check " + file, 2, "knob --lr: step must be at least 1e-06, got 1e-300",
       writes(with_knob("flag = \"--lr\"\nlabel = \"lr\"\nmin = 0.1\nmax = 1\nstep = 1e-300\ndefault = 1"))},
      {"LessonKnobTooManyValues", "lesson check " + file, 2,
       "knob --lr: min 0 to max 1000000 in steps of 1 gives 1000001 values; at most 1000",
       writes(with_knob("flag = \"--lr\"\nlabel = \"lr\"\nmin = 0\nmax = 1000000\ndefault = 1"))},
      {"LessonAnswerNegativeInfinity", "lesson check " + file, 2,
       "question 1: answer column 1: cannot be computed: -1e+308 * 1e+308 is -inf, not a finite number",
       writes(with_answer("-1e308 * 1e308"))},
      {"LessonAnswerOverflowsOnTheTrace", "lesson check " + file, 1,
       "question 1: answer cannot be computed: -16 * 1e+308 is -inf, not a finite number",
       writes(with_answer("-count(type=span) * 1e308 * 1e308"))},
      {"LessonKnobRepeatedOnTheCommandLine",
       "lesson run 01-one-gpu --no-viz --out {dir}/out --knob batch=64 --knob batch=128", 2,
       "--knob batch is given twice (batch=64 and batch=128); give each knob once"},

      // ---- 5. the right reason for a path that is no lesson file; a FIFO is never opened ----
      {"LessonCheckADirectory", "lesson check {dir}", 2,
       "is a directory, not a lesson file: give a directory of lessons as --lessons-dir"},
      {"LessonCheckAFifo",
       "lesson check {dir}/fifo.toml",
       2,
       "fifo.toml is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { make_fifo(d / "fifo.toml"); },
       {},
       {},
       DPSCOPE_CLI,
       seconds(10)},
      {"LessonCheckAFifoWithoutSuffix",
       "lesson check {dir}/fifo",
       2,
       "fifo is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { make_fifo(d / "fifo"); },
       {},
       {},
       DPSCOPE_CLI,
       seconds(10)},
      {"LessonCheckMissingPath", "lesson check {dir}/missing.toml", 2, "missing.toml: no such file"},
      {"LessonRunAFifo",
       "lesson run {dir}/fifo.toml --no-viz --out {dir}/out",
       2,
       "is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { make_fifo(d / "fifo.toml"); },
       {},
       {},
       DPSCOPE_CLI,
       seconds(10)},
      {"LessonHandoutAFifo",
       "lesson handout {dir}/fifo.toml {dir}/out --no-png",
       2,
       "is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { make_fifo(d / "fifo.toml"); },
       {},
       {},
       DPSCOPE_CLI,
       seconds(10)},
      {"LessonListAFifoAmongLessons",
       "lesson list --lessons-dir {dir}",
       2,
       "01-x.toml is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { make_fifo(d / "01-x.toml"); },
       {},
       {},
       DPSCOPE_CLI,
       seconds(10)},
      {"LessonsDirIsAFile", "lesson list --lessons-dir {dir}/file", 2,
       "/file is not a directory (a file: give it as the lesson, not --lessons-dir)",
       [](const fs::path& d, const Fixtures&) { write_file(d / "file", "x"); }},
      {"VizLessonAFifo",
       "--lesson {dir}/fifo.toml --screenshot {dir}/s.png --size 320x200",
       1,
       "is a FIFO (named pipe), not a regular file",
       [](const fs::path& d, const Fixtures&) { make_fifo(d / "fifo.toml"); },
       {},
       {},
       kViz,
       seconds(20)},
  };
}

}  // namespace dpscope::testing
