// Hostile-input rows of the fifth pass: text from a trace or a lesson file (a step's name, a device's,
// a key) that reached the user's terminal raw, in an error line (directly or quoted by `dpscope
// launch`) or in `trace stats`' table; stdout on a full disk; `bench` started by `dpscope launch`.
// The TCP store's rows are unit tests (comm_tests: TcpStore.*). Each row failed before its fix
// (docs/reliability.md, "Fifth pass").
#include "cli/hostile_input.hpp"
#include "support/ports.hpp"

namespace dpscope::testing {

namespace {

// A torch.profiler trace whose step is named "ProfilerStep#" ESC "[31m" LF "5": a colour escape and
// a newline, written as JSON escapes, as {dir}/step.json.
void step_name_with_escapes(const fs::path& d, const Fixtures&) {
  write_file(d / "step.json",
             R"({"baseTimeNanoseconds":1000000,"traceEvents":[)"
             R"({"ph":"X","name":"ProfilerStep#\u001b[31m\n5","tid":1,"ts":1000,"dur":100}]})");
}

// The one line that names the step, its escape and newline written out.
const std::string kStepNamed = R"('ProfilerStep#\x1b[31m\n5' has no step number)";

}  // namespace

std::vector<Case> hostile_pass5_cases() {
  std::vector<Case> rows = {
      // ---- a trace's text never reaches the terminal raw ----
      // The name split the error line in two and turned the user's terminal red.
      {"TraceImportStepNameWithEscapes", "trace import {dir}/step.json {dir}/out.jsonl", 2, kStepNamed,
       step_name_with_escapes},
  };
  // A trace whose device is named "sim" ESC "]0;PWNED" BEL ESC "[2J:0": `trace stats` printed it raw,
  // which retitled the terminal's window and cleared its screen; now the name is written out.
  Case stats{"TraceStatsDeviceNameWithEscapes", "trace stats {dir}/t.jsonl", 0, "",
             [](const fs::path& d, const Fixtures& fx) {
               const std::string trace = read_file(fx.trace);
               ASSERT_NE(trace.find(R"("name":"sim:0")"), std::string::npos);
               write_file(d / "t.jsonl", replace_all(trace, R"("name":"sim:0")",
                                                     R"("name":"sim\u001b]0;PWNED\u0007\u001b[2J:0")"));
             }};
  stats.stdout_contains = R"(sim\x1b]0;PWNED\x07\x1b[2J:0 )";
  rows.push_back(stats);
  // A lesson file's quoted key with an escape and a newline: `lesson check` quoted it raw.
  rows.push_back({"LessonUnknownKeyWithEscapes", "lesson check {dir}/01-hostile.toml", 2,
                  R"(01-hostile.toml:6: unknown key '\x1b[31mbad\nkey' in the lesson)",
                  [](const fs::path& d, const Fixtures&) {
                    write_file(d / "01-hostile.toml",
                               "id = \"01-hostile\"\ntitle = \"Hostile\"\nminutes = 1\ngoals = [\"none\"]\n"
                               "snippet = \"x = 1\\n\"\n\"\\u001b[31mbad\\nkey\" = 1\n");
                  }});
  // dpscope-viz quoted a trace path holding ESC "[31m" raw (the path as a user might paste it).
  Case viz{"VizTracePathWithEscapes", "{dir}/a\x1b[31mb.jsonl --screenshot {dir}/s.png --size 320x200", 1,
           R"(cannot read trace '{dir}/a\x1b[31mb.jsonl': no such file)"};
  viz.program = kViz;
  rows.push_back(viz);
  // `bench` (sim) under dpscope launch: each rank ran the whole bench and printed the same table.
  // Rank 1 only sleeps, so the launcher stops it without a word whichever moment rank 0 fails (its
  // line then names it).
  Case bench{
      "LaunchBenchOnTheSimulatedBackend",
      "launch --nproc 2 --grace-s 1 --master-port " + std::to_string(free_port()) +
          " -- /bin/sh {dir}/rank.sh",
      2, "but bench --backend sim runs all 2 devices in one process", [](const fs::path& d, const Fixtures&) {
        write_file(d / "rank.sh", "if [ $RANK = 1 ]; then exec sleep 30; fi; exec " +
                                      std::string(DPSCOPE_CLI) + " bench all_reduce --devices 2 -e 1K\n");
      }};
  bench.error_lines = 3;  // rank 1 is named in the launcher's line
  bench.failing_rank = 0;
  bench.may_be_silent = 1;
  rows.push_back(bench);
  // stdout on a full disk: `trace stats` wrote its table into nothing and exited 0 (as every command).
  Case full{"TraceStatsOntoAFullDevice", "{dir}/stats.sh", 1,
            "cannot write standard output: No space left on device",
            [](const fs::path& d, const Fixtures& fx) {
              write_file(d / "stats.sh", "exec " + std::string(DPSCOPE_CLI) + " trace stats " +
                                             fx.trace.string() + " >/dev/full\n");
            }};
  full.program = "/bin/sh";
  rows.push_back(full);
  // The same error on a rank of `dpscope launch`: the rank's line and the launcher's, which quotes it.
  Case launched{"LaunchQuotesARankErrorWithEscapes",
                "launch --nproc 2 --grace-s 1 --master-port " + std::to_string(free_port()) +
                    " -- /bin/sh {dir}/rank.sh",
                2, kStepNamed, [](const fs::path& d, const Fixtures& fx) {
                  step_name_with_escapes(d, fx);
                  write_file(d / "rank.sh", "if [ $RANK = 1 ]; then exec sleep 30; fi; exec " +
                                                std::string(DPSCOPE_CLI) + " trace import " +
                                                (d / "step.json").string() + " " +
                                                (d / "out.jsonl").string() + "\n");
                }};
  launched.error_lines = 3;  // rank 1 is named in the launcher's line
  launched.failing_rank = 0;
  launched.may_be_silent = 1;
  rows.push_back(launched);
  return rows;
}

}  // namespace dpscope::testing
