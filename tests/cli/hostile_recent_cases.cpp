// Hostile-input rows for the surfaces the last sessions added: `trace import` (torch.profiler
// traces), rank directories as dpscope_torch writes them, `bench --devices`, fidelity_report on a
// user's own nccl-tests tables, and the Pythons the lesson commands start. Each row failed before
// its fix (docs/reliability.md, "Recent surfaces").
#include <sys/stat.h>

#include "cli/hostile_input.hpp"

namespace dpscope::testing {

namespace {

// A torch.profiler trace of one step whose one collective (record_param_comms) claims `nelems`
// elements of `dtype`, as {dir}/p.json.
std::function<void(const fs::path&, const Fixtures&)> kineto_with_message(std::string args) {
  return [args](const fs::path& d, const Fixtures&) {
    write_file(d / "p.json", R"({"baseTimeNanoseconds":1000000,"traceEvents":[)"
                             R"({"ph":"X","name":"ProfilerStep#5","tid":1,"ts":1000,"dur":100},)"
                             R"({"ph":"X","name":"record_param_comms","tid":1,"ts":1010,"dur":3,"args":)" +
                                 args + "}]}");
  };
}

// A verify that the import wrote nothing.
void no_import_output(const fs::path& d, const Fixtures&) {
  EXPECT_FALSE(fs::exists(d / "out.jsonl")) << "an output was written from a refused trace";
}

// A two-GPU all_reduce table of nccl-tests as {dir}/tables/t.csv, with `rows` under its header and
// `header_edit` applied to the header lines (key -> value; "" removes the line).
std::function<void(const fs::path&, const Fixtures&)> table(
    std::string rows, std::map<std::string, std::string> header_edit = {}) {
  return [rows, header_edit](const fs::path& d, const Fixtures&) {
    std::map<std::string, std::string> header = {
        {"system", "two GPUs"},      {"source", "a test"},   {"command", "all_reduce_perf -b 8 -e 1M -g 2"},
        {"preset", "rtx-2080ti"},    {"gpus_per_node", "2"}, {"nodes", "1"},
        {"collective", "all_reduce"}};
    for (const auto& [key, value] : header_edit) header[key] = value;
    std::string text;
    for (const auto& [key, value] : header)
      if (!value.empty()) text += "# " + key + ": " + value + "\n";
    fs::create_directories(d / "tables");
    write_file(d / "tables" / "t.csv", text + "size_bytes,time_us,algbw_gbps,busbw_gbps\n" + rows);
  };
}
const std::string kRows = "1024,12.1,0.08,0.08\n1048576,180.5,5.81,5.81\n";

// A `python3` that does `body` (a shell script) as {dir}/bin/python3.
std::function<void(const fs::path&, const Fixtures&)> python_that(std::string body) {
  return [body](const fs::path& d, const Fixtures&) {
    fs::create_directories(d / "bin");
    write_file(d / "bin" / "python3", "#!/bin/sh\n" + body + "\n");
    fs::permissions(d / "bin" / "python3", fs::perms::owner_all);
  };
}

}  // namespace

std::vector<Case> hostile_recent_cases() {
  return {
      // ---- trace import: sizes a profile claims are checked, never wrapped ----
      // "In msg nelems" x 8 bytes wrapped to 18446744073709551608 ("all_reduce 16777216.00 TiB").
      {"TraceImportMessageSizeOverflows",
       "trace import {dir}/p.json {dir}/out.jsonl",
       2,
       "traceEvents[1]: ('record_param_comms'): 'In msg nelems' x bytes per element: 9223372036854775807 x 8 "
       "overflows a 64-bit integer",
       kineto_with_message(R"({"Collective name":"allreduce","In msg nelems":9223372036854775807,)"
                           R"("dtype":"Double"})"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       no_import_output},
      {"TraceImportInputDimsOverflow",
       "trace import {dir}/p.json {dir}/out.jsonl",
       2,
       "'Input Dims': 4294967296 x 4294967296 overflows a 64-bit integer",
       kineto_with_message(R"({"Collective name":"allreduce","Input Dims":[[4294967296,4294967296]],)"
                           R"("Input type":["float"]})"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       no_import_output},
      // ---- rank directories: a rank "file" that is a directory is named as one ----
      // `trace merge` took DIR/rank-2.jsonl for another rank directory ("... has no rank-K.jsonl").
      {"TraceMergeRankFileIsADirectory", "trace merge {dir}/run {dir}/merged.jsonl", 2,
       "run/rank-0.jsonl': is a directory",
       [](const fs::path& d, const Fixtures&) { fs::create_directories(d / "run" / "rank-0.jsonl"); }},
      // A rank file of 512 MiB without a '\n' (sparse: no disk used): the header's '\n' was searched for
      // from the start after every 64 KiB read, quadratic (256 MiB took 22 s, 1 GiB over 2 minutes).
      // (Since the fourth pass a line is at most 256 MiB: the header is refused once it passes that.)
      {"TraceStatsRankFileWithoutANewline", "trace stats {dir}/run", 2,
       "run/rank-0.jsonl:1: a line longer than 256 MiB",
       [](const fs::path& d, const Fixtures&) {
         fs::create_directories(d / "run");
         write_file(d / "run" / "rank-0.jsonl", "");
         fs::resize_file(d / "run" / "rank-0.jsonl", uintmax_t{512} << 20);
       }},
      // ---- bench: one machine's GPUs are bounded ----
      // --devices 2147483647 died of "vector::_M_default_append"; t4 with 1024 did not end in a minute.
      {"BenchDevicesPastOneMachine", "bench all_reduce --preset t4 --devices 2147483647 --timing-only", 2,
       "--devices 2147483647: at most 64 GPUs in one machine"},
      {"BenchDevicesPastOneMachineOnAClusterPreset", "bench all_reduce --devices 65 --timing-only", 2,
       "--devices 65: at most 64 GPUs in one machine; more are nodes: --devices 8 --nodes N"},
      // ---- fidelity_report on a user's own tables ----
      // OUT was opened after the tables were read: a table given as OUT was overwritten.
      {"FidelityReportOntoItsTable",
       "{dir}/tables {dir}/tables/t.csv",
       2,
       "OUT {dir}/tables/t.csv is one of the files the input TABLES_DIR",
       table(kRows),
       {},
       {},
       kReport,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures&) {
         EXPECT_NE(read_file(d / "tables" / "t.csv").find("size_bytes,time_us"), std::string::npos)
             << "the table was overwritten";
       }},
      // The tables of TABLES_DIR/not-compared/ are inputs too (their own section of the report).
      {"FidelityReportOntoANotComparedTable",
       "{dir}/tables {dir}/tables/not-compared/t.csv",
       2,
       "OUT {dir}/tables/not-compared/t.csv is the same file as the input table",
       [](const fs::path& d, const Fixtures& fx) {
         table(kRows)(d, fx);
         fs::create_directories(d / "tables" / "not-compared");
         fs::copy_file(d / "tables" / "t.csv", d / "tables" / "not-compared" / "t.csv");
       },
       {},
       {},
       kReport,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures&) {
         EXPECT_NE(read_file(d / "tables" / "not-compared" / "t.csv").find("size_bytes,time_us"),
                   std::string::npos)
             << "the table was overwritten";
       }},
      // A FIFO as OUT or as a table blocked the report forever.
      {"FidelityReportIntoAFifo",
       "{dir}/tables {dir}/o.md",
       2,
       "OUT {dir}/o.md: is a FIFO",
       [](const fs::path& d, const Fixtures& fx) {
         table(kRows)(d, fx);
         ASSERT_EQ(::mkfifo((d / "o.md").c_str(), 0600), 0);
       },
       {},
       {},
       kReport},
      {"FidelityReportTableIsAFifo",
       "{dir}/tables {dir}/o.md",
       2,
       "cannot read nccl-tests table '{dir}/tables/u.csv': is a FIFO",
       [](const fs::path& d, const Fixtures& fx) {
         table(kRows)(d, fx);
         ASSERT_EQ(::mkfifo((d / "tables" / "u.csv").c_str(), 0600), 0);
       },
       {},
       {},
       kReport},
      // A size of 1e30 was cast from a double (undefined behaviour: "size 0 holds no element").
      {"FidelityReportSizeNotAWholeNumber",
       "{dir}/tables {dir}/o.md",
       2,
       "t.csv:9: size_bytes '1e30' must be a whole number from 1 to 1125899906842624",
       table("1e30,5.0,0,0\n"),
       {},
       {},
       kReport},
      // 1000000000 nodes x 2 GPUs overflowed an int ("fidelity_size: -589934592 ranks").
      {"FidelityReportNodesOverflow",
       "{dir}/tables {dir}/o.md",
       2,
       "nodes '1000000000' must be a whole number from 1 to 65536",
       table(kRows, {{"nodes", "1000000000"}}),
       {},
       {},
       kReport},
      {"FidelityReportGpusNotAWholeNumber",
       "{dir}/tables {dir}/o.md",
       2,
       "gpus_per_node '2.5' must be a whole number from 1 to 64",
       table(kRows, {{"gpus_per_node", "2.5"}}),
       {},
       {},
       kReport},
      {"FidelityReportSizesOutOfOrder",
       "{dir}/tables {dir}/o.md",
       2,
       "t.csv:10: size_bytes 1024 does not grow from the row before (1048576)",
       table("1048576,180.5,5.81,5.81\n1024,12.1,0.08,0.08\n"),
       {},
       {},
       kReport},
      // A missing TABLES_DIR was a raw "filesystem error: directory iterator cannot open directory".
      {"FidelityReportTablesDirMissing",
       "{dir}/missing {dir}/o.md",
       2,
       "TABLES_DIR '{dir}/missing': no such file",
       {},
       {},
       {},
       kReport},
      {"FidelityReportTablesDirEmpty",
       "{dir} {dir}/o.md",
       2,
       "holds no nccl-tests table (*.csv)",
       {},
       {},
       {},
       kReport},
      // ---- lesson knobs ----
      // "2.0" passed the knob's range and failed the scenario's integer flag, blamed on the lesson
      // ("the scenario failed: ... Could not convert: --devices = 2.0 (... declares it: expect_error)").
      {"LessonKnobWholeNumberWrittenAsDecimal", "lesson run 03 --no-viz --out {dir} --knob devices=2.0", 2,
       "lesson 03-why-dp-is-slow: --devices takes whole numbers: write '2', not '2.0'"},
      // An output directory that is a device: "directory '/dev/null' is a character device, not a
      // regular file" (a directory was expected, not a regular file).
      {"LessonHandoutIntoADevice", "lesson handout 01-one-gpu /dev/null", 2,
       "directory '/dev/null' is a character device, not a directory"},
      // ---- the Pythons the lesson commands start ----
      // A python3 on PATH that hangs held `lesson check` forever (its py_compile was waited on unbounded).
      {"LessonCheckPythonThatHangs",
       "lesson check 01-one-gpu",
       1,
       "01-one-gpu: snippet not checked: {dir}/bin/python3 -m py_compile did not finish within 20 s",
       python_that("exec sleep 1000"),
       {{"PATH", "{dir}/bin:/usr/bin:/bin"}},
       {},
       DPSCOPE_CLI,
       seconds(120)},
      // A python3 that fails at once was reported as "snippet does not compile as Python".
      {"LessonCheckPythonThatFails",
       "lesson check 01-one-gpu",
       1,
       "01-one-gpu: snippet not checked: {dir}/bin/python3 -m py_compile exited with status 1, and printed "
       "nothing",
       python_that("exit 1"),
       {{"PATH", "{dir}/bin:/usr/bin:/bin"}},
       {},
       DPSCOPE_CLI,
       seconds(90)},
      // A Python that "imports torch" and exits 0 without recording: a usage error (exit 2) saying
      // "'.../trace' is not a directory".
      {"Lesson14PythonWritesNoTrace",
       "lesson run 14 --no-viz --out {dir}/out",
       1,
       "the PyTorch run ended (exit 0) but wrote no trace into",
       python_that("exit 0"),
       {{"DPSCOPE_PYTHON", "{dir}/bin/python3"}},
       {},
       DPSCOPE_CLI,
       seconds(60)},
  };
}

}  // namespace dpscope::testing
