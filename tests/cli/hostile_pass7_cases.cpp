// Hostile-input rows of the seventh pass: a lost stdout must lose the lines, never the run or the
// result (`train` on a full disk, dpscope-viz's benchmark table). Each row failed before its fix
// (docs/reliability.md, "Seventh pass").
#include <string>
#include <tuple>

#include "cli/hostile_input.hpp"

namespace dpscope::testing {

std::vector<Case> hostile_pass7_cases() {
  std::vector<Case> rows;
  // Training's output lost is not the training lost: `train ... >/dev/full` stopped at its first
  // step line (fmt::print threw once stdio's buffer reached the disk), before --save and the rest of
  // the trace were written. Now the run goes on to its end, says so at once (a warning), and fails
  // naming the loss.
  {
    Case c =
        shell_row("TrainRunsOnWithStdoutOntoAFullDevice",
                  "exec DPSCOPE train --mode ddp --devices 2 --dataset blobs:2000 --model 2-64-3 --epochs 3 "
                  "--save {dir}/w.safetensors --trace {dir}/t.jsonl >/dev/full\n",
                  1, "cannot write standard output: No space left on device (the run ended");
    c.verify = [](const fs::path& d, const Fixtures&) {
      EXPECT_TRUE(fs::exists(d / "w.safetensors")) << "--save was not written";
      const std::string trace = read_file(d / "t.jsonl");
      EXPECT_NE(trace.find("\"name\":\"loss\""), std::string::npos) << "the trace holds no step";
      EXPECT_EQ(trace.back(), '\n');
    };
    rows.push_back(c);
  }
  // dpscope-viz's results on a lost stdout: its benchmark's table went nowhere with exit code 0
  // (the viewer checked none of its output), and with stdout closed the first file it opened took
  // descriptor 1. It now holds closed descriptors as dpscope does and fails naming the loss.
  for (const auto& [name, redirect, reason] :
       {std::tuple{"VizBenchOntoAFullDevice", ">/dev/full", "No space left on device"},
        std::tuple{"VizBenchWithStdoutClosed", ">&-", "Bad file descriptor"}}) {
    Case c = shell_row(
        name, "exec VIZ {fx}/good.jsonl --bench-frames 1 --size 320x200 " + std::string(redirect) + "\n", 1,
        std::string("cannot write standard output: ") + reason + " (what it shows is incomplete)");
    const auto script = c.setup;
    c.setup = [script](const fs::path& d, const Fixtures& fx) {
      script(d, fx);
      write_file(d / "run.sh", replace_all(read_file(d / "run.sh"), "VIZ", kViz));
    };
    c.speaker = kViz;
    if (kViz.empty()) c.pending = "dpscope-viz is not built";
    rows.push_back(c);
  }
  return rows;
}

}  // namespace dpscope::testing
