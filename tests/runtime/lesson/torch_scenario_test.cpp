// A lesson's PyTorch scenario (lesson/torch_scenario.hpp): its fixed shape, the scripts it may run
// and the arguments it may give them, so that a lesson file someone else wrote runs nothing but
// dpscope's own examples and writes nothing outside its scratch directory.
#include "dpscope/lesson/torch_scenario.hpp"

#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"

namespace dpscope::lesson {
namespace {

std::vector<std::string> scenario(std::vector<std::string> script_args,
                                  const std::string& script = "examples/pytorch/ddp_tutorial.py",
                                  const std::string& nproc = "2") {
  std::vector<std::string> args = {"launch", "--nproc",           nproc, "--", "python3",
                                   "-m",     "dpscope_torch.run", script};
  args.insert(args.end(), script_args.begin(), script_args.end());
  return args;
}

TEST(TorchScenario, IsTheLaunchShape) {
  EXPECT_TRUE(is_torch_scenario(scenario({})));
  EXPECT_FALSE(is_torch_scenario({"train", "--mode", "ddp"}));
  EXPECT_FALSE(is_torch_scenario({}));
  const TorchScenario s =
      parse_torch_scenario(scenario({"--sizes", "784-512-10", "--export", "{scratch}/same"}));
  EXPECT_EQ(s.nproc, 2);
  EXPECT_EQ(s.script, "examples/pytorch/ddp_tutorial.py");
  EXPECT_EQ(s.script_args, (std::vector<std::string>{"--sizes", "784-512-10", "--export", "{scratch}/same"}));
}

TEST(TorchScenario, AnythingButTheFixedPartIsRefused) {
  const std::string shape =
      "a PyTorch scenario is \"launch\", \"--nproc\", N, \"--\", \"python3\", \"-m\", \"dpscope_torch.run\", "
      "\"examples/pytorch/SCRIPT.py\", and the script's arguments";
  EXPECT_EQ(torch_scenario_problem({"launch", "--nproc", "2", "--", "python3", "evil.py"}), shape);
  EXPECT_EQ(torch_scenario_problem({"launch", "--nproc", "2", "--", "bash", "-c", "rm -rf ~", "x.py"}),
            shape);
  EXPECT_EQ(
      torch_scenario_problem({"launch", "--nproc", "2", "--", "python3", "-c", "dpscope_torch.run", "x"}),
      shape);
  EXPECT_EQ(torch_scenario_problem(scenario({}, "examples/pytorch/ddp_tutorial.py", "0")),
            "--nproc '0' must be a whole number from 1 to 8");
  EXPECT_EQ(torch_scenario_problem(scenario({}, "examples/pytorch/ddp_tutorial.py", "2x")),
            "--nproc '2x' must be a whole number from 1 to 8");
  EXPECT_EQ(torch_scenario_problem(scenario({}, "examples/pytorch/ddp_tutorial.py", "99")),
            "--nproc '99' must be a whole number from 1 to 8");
}

TEST(TorchScenario, OnlyDpscopesOwnExamplesRun) {
  for (const char* script :
       {"/tmp/mine.py", "examples/pytorch/../../x.py", "examples/pytorch/sub/x.py", "examples/pytorch/X.py",
        "examples/pytorch/.py", "examples/pytorch/x.sh", "examples/x.py"})
    EXPECT_EQ(torch_scenario_problem(scenario({}, script)),
              std::string("the script '") + script +
                  "' must be one of dpscope's examples, examples/pytorch/NAME.py (NAME: lower-case letters, "
                  "digits, '_')")
        << script;
  EXPECT_EQ(torch_scenario_problem(scenario({}, "examples/pytorch/ddp_tutorial_2.py")), "");
}

TEST(TorchScenario, ScriptArgumentsStayInTheSandbox) {
  EXPECT_EQ(
      torch_scenario_problem(scenario({"--epochs", "2", "--straggler", "1:30", "--lr=0.05", "-v", "words",
                                       "{scratch}", "{scratch}/a/b.json", "--dump={scratch}/d"})),
      "");
  const std::string tail =
      "' may be an option, a plain word (letters, digits, '_.:,=+-') or a path inside {scratch} "
      "(\"{scratch}/out\"): a scenario writes only inside its scratch directory";
  for (const char* arg :
       {"/etc/passwd", "../x", "..", "a/b", "{scratch}/../x", "{scratch}x", "--dump=/tmp/x",
        "--dump={scratch}/../../x", "~/x", "$HOME", "{lesson-scratch}/x", "a b", "{scratch}/a b"})
    EXPECT_EQ(torch_scenario_problem(scenario({"--dump", arg})),
              std::string("the script's argument '") + arg + tail)
        << arg;
  EXPECT_EQ(torch_scenario_problem(scenario({"--trace-dir", "{scratch}/t"})),
            "the script's arguments must not give --trace-dir: the lesson chooses where the trace goes");
  EXPECT_EQ(torch_scenario_problem(scenario({"--trace-dir={scratch}/t"})),
            "the script's arguments must not give --trace-dir: the lesson chooses where the trace goes");
  EXPECT_EQ(torch_scenario_problem(scenario({"--help"})),
            "the script's argument --help prints help instead of running the scenario");
  EXPECT_EQ(torch_scenario_problem(scenario({"-h"})),
            "the script's argument -h prints help instead of running the scenario");
  EXPECT_EQ(torch_scenario_problem(scenario({"--a/b=1"})), "the script's argument '--a/b=1' is no option");
  try {
    parse_torch_scenario(scenario({"/etc/passwd"}));
    FAIL() << "parsed a scenario that names /etc/passwd";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  }
}

}  // namespace
}  // namespace dpscope::lesson
