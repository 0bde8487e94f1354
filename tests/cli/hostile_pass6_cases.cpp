// Hostile-input rows of the sixth pass: `dpscope launch` with its own stdout or stderr full or
// closed, a closed stdout that a file took the place of, a rank's child that never stops writing, and
// paths and file text that reached the terminal raw in the lines that succeed (`trace`'s "wrote ...",
// its warnings, `train`'s summary, `lesson list`, `presets`, fidelity_report, dpscope-viz's
// benchmark). Each row failed before its fix (docs/reliability.md, "Sixth pass").
#include "cli/hostile_input.hpp"

namespace dpscope::testing {

namespace {

// A colour escape as a user might paste it into a name, and how every line prints it.
const std::string kEsc = "\x1b[31m";
const std::string kEscWritten = R"(\x1b[31m)";

// A row that succeeds (exit 0) and prints `shown` (the path or name, written out) on stdout.
Case shows(std::string name, std::string args, std::string shown,
           std::function<void(const fs::path&, const Fixtures&)> setup = {}) {
  Case c{std::move(name), std::move(args), 0, "", std::move(setup)};
  c.stdout_contains = std::move(shown);
  return c;
}

}  // namespace

std::vector<Case> hostile_pass6_cases() {
  std::vector<Case> rows;
  // ---- train --resume's warning names the checkpoint files it passed over: their paths written out ----
  {
    Case c =
        shell_row("ResumeWarningPathWithEscapes",
                  "ck='{dir}/ck" + kEsc +
                      "'\n"
                      "DPSCOPE " +
                      kTrain +
                      " --steps 4 --checkpoint-dir \"$ck\" --checkpoint-every 2 >/dev/null || "
                      "exit 9\n"
                      "cp \"$ck/checkpoint-00000002.safetensors\" \"$ck/checkpoint-00000009.safetensors\"\n"
                      "exec DPSCOPE " +
                      kTrain +
                      " --steps 6 --checkpoint-dir \"$ck\" --checkpoint-every 2 --resume "
                      "2>&1\n",
                  0, "");
    c.error_lines = 0;
    c.stdout_contains =
        "dpscope: warning: checkpoint {dir}/ck" + kEscWritten + "/checkpoint-00000009.safetensors: its name";
    rows.push_back(c);
  }
  // ---- dpscope launch: the ranks' output that cannot be written is a failure, not a success ----
  // Its write_all() dropped the ranks' lines on a full disk and the launcher exited 0.
  rows.push_back(shell_row("LaunchStdoutOntoAFullDevice",
                           "exec DPSCOPE launch --nproc 2 -- /bin/echo hello >/dev/full\n", 1,
                           "cannot write standard output: No space left on device (every rank exited 0, but "
                           "what they printed there is incomplete)"));
  // The same with stdout closed: the first pipe to a rank took descriptor 1, and the launcher wrote
  // the ranks' lines into its own pipe's read end (dropped, exit 0).
  rows.push_back(shell_row("LaunchStdoutClosed", "exec DPSCOPE launch --nproc 2 -- /bin/echo hello >&-\n", 1,
                           "cannot write standard output: Bad file descriptor"));
  // stderr full: the ranks' error lines were lost with exit 0. The launcher's own line cannot be
  // seen there either: the exit code says it, which the script prints.
  {
    Case c = shell_row("LaunchStderrOntoAFullDevice",
                       "DPSCOPE launch --nproc 1 -- /bin/sh -c 'echo oops >&2' 2>/dev/full\n"
                       "status=$?\necho \"launch exited $status\"\nexit $status\n",
                       1, "");
    c.error_lines = 0;
    c.stdout_contains = "launch exited 1";
    rows.push_back(c);
  }
  // A rank that leaves a child writing without end held the launcher after every rank had exited:
  // it read on while the pipe held something, and SIGTERM did not end it either. The child (perl, as
  // Debian always has it) makes the pipe 1 MiB (F_SETPIPE_SZ = 1031) and keeps it full, so the
  // launcher never finds it empty. Now it reads for 1 s more, then lets go.
  {
    Case c = shell_row("LaunchRankChildNeverStopsWriting",
                       "exec DPSCOPE launch --nproc 1 -- /bin/sh {dir}/rank.sh >/dev/null\n", 0, "");
    const auto script = c.setup;
    c.setup = [script](const fs::path& d, const Fixtures& fx) {
      script(d, fx);
      write_file(d / "rank.sh",
                 "perl -e 'fcntl(STDOUT, 1031, 1 << 20) or die; $l = \"y\\n\" x 32768; syswrite(STDOUT, $l) "
                 "while 1' &\nsleep 1\nexit 0\n");
    };
    c.limit = seconds(20);
    rows.push_back(c);
  }
  // ---- a closed stdout is not a file's descriptor ----
  // `train --trace t.jsonl >&-`: the trace took descriptor 1, and the step lines (one a step with
  // --timing-only) went into the trace once stdio's buffer filled: the trace no longer read. Now
  // descriptor 1 stays taken (/dev/null, read-only), the trace is whole, and writing stdout fails.
  {
    Case c =
        shell_row("TrainWithStdoutClosed",
                  "exec DPSCOPE train --timing-only --mode ddp --devices 4 --model 784-512-10 --batch 64 "
                  "--steps 400 --trace {dir}/t.jsonl >&-\n",
                  1, "cannot write standard output: Bad file descriptor");
    c.verify = [](const fs::path& d, const Fixtures&) {
      const std::string trace = read_file(d / "t.jsonl");
      EXPECT_NE(trace.find("\"type\":\"header\""), std::string::npos) << "no trace was written";
      EXPECT_EQ(trace.find("\nstep "), std::string::npos) << "stdout went into the trace";
    };
    rows.push_back(c);
  }
  // A long output on a full disk: fmt::print threw when stdio's buffer filled, and the line said
  // "cannot write to file: No space left on device", naming no file.
  rows.push_back(
      shell_row("TrainTimingOnlyOntoAFullDevice",
                "exec DPSCOPE train --timing-only --mode ddp --devices 4 --model 784-512-10 --batch 64 "
                "--steps 400 >/dev/full\n",
                1, "cannot write standard output: No space left on device"));
  // ---- paths and names a command printed raw on success ----
  rows.push_back(shows("TraceExportPathWithEscapes",
                       "trace export --chrome {fx}/good.jsonl {dir}/o" + kEsc + ".json",
                       "wrote {dir}/o" + kEscWritten + ".json ("));
  // --lenient's warning quoted the file raw: "dpscope: warning: skipped PATH:3: ...".
  rows.push_back({"TraceStatsLenientWarningPathWithEscapes",
                  "trace stats --lenient {dir}/t" + kEsc + ".jsonl", 0, "",
                  [](const fs::path& d, const Fixtures& fx) {
                    std::istringstream in(read_file(fx.trace));
                    std::string out, line;
                    for (int i = 0; std::getline(in, line); ++i)
                      out += (i == 2 ? std::string("{") : line) + "\n";
                    write_file(d / ("t" + kEsc + ".jsonl"), out);
                  }});
  // A one-rank run's directory: the fixture trace with the "process" entry of a process rank.
  rows.push_back(shows("TraceMergePathWithEscapes", "trace merge {dir}/ranks {dir}/m" + kEsc + ".jsonl",
                       "wrote {dir}/m" + kEscWritten + ".jsonl (", [](const fs::path& d, const Fixtures& fx) {
                         fs::create_directories(d / "ranks");
                         const std::string trace = read_file(fx.trace);
                         const size_t run = trace.find(R"("run":{)");
                         ASSERT_NE(run, std::string::npos);
                         std::string rank = trace;
                         rank.insert(run + 7, R"("process":{"rank":0,"world_size":1,"clock_offset_ns":0,)"
                                              R"("clock_uncertainty_ns":0},)");
                         write_file(d / "ranks" / "rank-0.jsonl", rank);
                       }));
  rows.push_back(shows("TraceImportPathWithEscapes", "trace import {dir}/p" + kEsc + ".json {dir}/o.jsonl",
                       "rank 0: {dir}/p" + kEscWritten + ".json -> ", [](const fs::path& d, const Fixtures&) {
                         write_file(d / ("p" + kEsc + ".json"),
                                    R"({"baseTimeNanoseconds":1000000,"traceEvents":[)"
                                    R"({"ph":"X","name":"ProfilerStep#5","tid":1,"ts":1000,"dur":100}]})");
                       }));
  rows.push_back(shows("TrainSummaryPathWithEscapes", kTrain + " --steps 1 --trace {dir}/t" + kEsc + ".jsonl",
                       "trace: {dir}/t" + kEscWritten + ".jsonl ("));
  // The lessons' folder, as `lesson list` names it (a lesson file's own text may hold no control
  // character: the lesson reader refuses it).
  rows.push_back(shows("LessonListFolderWithEscapes", "lesson list --lessons-dir {dir}/l" + kEsc,
                       "1 lessons in {dir}/l" + kEscWritten + ";", [](const fs::path& d, const Fixtures&) {
                         fs::create_directories(d / ("l" + kEsc));
                         fs::copy_file(fs::path(DPSCOPE_SOURCE_DIR) / "lessons" / "01-one-gpu.toml",
                                       d / ("l" + kEsc) / "01-one-gpu.toml");
                       }));
  // A preset of the user's own (DPSCOPE_ASSETS) named with an escape: `presets` printed it raw.
  {
    Case c =
        shows("PresetsNameWithEscapes", "presets", "a hostile" + kEscWritten + " preset",
              [](const fs::path& d, const Fixtures&) {
                fs::create_directories(d / "presets");
                write_file(d / "presets" / "bad.toml",
                           "name = \"a hostile\\u001b[31m preset\"\nmemory_gb = 16.0\n"
                           "memory_bandwidth_gbps = 320.0\nfp32_tflops = 8.1\nlaunch_latency_us = 5.0\n"
                           "topology = \"pcie-host\"\n[host_link]\nkind = \"pcie3\"\nbandwidth_gbps = 16.0\n"
                           "latency_us = 1.5\n[peer_link]\nkind = \"pcie3\"\nbandwidth_gbps = 16.0\n"
                           "latency_us = 2.0\n");
              });
    c.env = {{"DPSCOPE_ASSETS", "{dir}"}};
    rows.push_back(c);
  }
  // fidelity_report names each system by its table's file name.
  {
    Case c = shows("FidelityReportTableNameWithEscapes", "{dir}/tables {dir}/o.md",
                   "t" + kEscWritten + ": median", [](const fs::path& d, const Fixtures&) {
                     fs::create_directories(d / "tables");
                     write_file(
                         d / "tables" / ("t" + kEsc + ".csv"),
                         "# system: two GPUs\n# source: a test\n# command: all_reduce_perf -b 8 -e 1M -g 2\n"
                         "# preset: rtx-2080ti\n# gpus_per_node: 2\n# nodes: 1\n# collective: all_reduce\n"
                         "size_bytes,time_us,algbw_gbps,busbw_gbps\n1024,12.1,0.08,0.08\n"
                         "1048576,180.5,5.81,5.81\n");
                   });
    c.program = kReport;
    rows.push_back(c);
  }
  // dpscope-viz's frame benchmark: the trace's path on its first line, and in its error line.
  {
    Case c = shows(
        "VizBenchPathWithEscapes", "{dir}/t" + kEsc + ".jsonl --bench-frames 1 --size 320x200",
        "dpscope-viz frame benchmark: {dir}/t" + kEscWritten + ".jsonl",
        [](const fs::path& d, const Fixtures& fx) { fs::copy_file(fx.trace, d / ("t" + kEsc + ".jsonl")); });
    c.program = kViz;
    rows.push_back(c);
  }
  {
    Case c{"VizBenchMissingTraceWithEscapes", "{dir}/a" + kEsc + "b.jsonl --bench-frames 1 --size 320x200", 1,
           "'{dir}/a" + kEscWritten + "b.jsonl'"};
    c.program = kViz;
    rows.push_back(c);
  }
  return rows;
}

}  // namespace dpscope::testing
