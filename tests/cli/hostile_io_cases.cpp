// Hostile-input rows, input and output guards: FIFOs and device nodes as files, outputs
// that are inputs or other outputs, values that are empty, lines a reader must name truly.
#include <sys/stat.h>

#include "cli/hostile_input.hpp"

namespace dpscope::testing {

namespace {

void make_fifo(const fs::path& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path; }

// A setup that makes {dir}/NAME a FIFO.
std::function<void(const fs::path&, const Fixtures&)> fifo_named(std::string name) {
  return [name](const fs::path& d, const Fixtures&) {
    fs::create_directories((d / name).parent_path());
    make_fifo(d / name);
  };
}

// A symlink `name` (its directory made) to the file `target` holding "precious", both under the row's
// directory; and the verify that the target still holds it and `name` is now a file of its own.
std::function<void(const fs::path&, const Fixtures&)> link_to_precious(std::string name) {
  return [name](const fs::path& d, const Fixtures&) {
    fs::create_directories((d / name).parent_path());
    write_file(d / "precious.txt", "precious");
    fs::create_symlink(d / "precious.txt", d / name);
  };
}
std::function<void(const fs::path&, const Fixtures&)> precious_kept(std::string name) {
  return [name](const fs::path& d, const Fixtures&) {
    EXPECT_EQ(read_file(d / "precious.txt"), "precious") << "written through the link " << name;
    EXPECT_FALSE(fs::is_symlink(d / name)) << name << " should have been replaced by the new file";
  };
}

// A verify that `path` is still a FIFO (never replaced by a regular file).
std::function<void(const fs::path&, const Fixtures&)> still_fifo(std::string name) {
  return [name](const fs::path& d, const Fixtures&) {
    struct stat st {};
    ASSERT_EQ(::lstat((d / name).c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << name << " was replaced";
  };
}

// A verify that the machine's /dev/full is still a character device.
void dev_full_untouched(const fs::path&, const Fixtures&) {
  struct stat st {};
  ASSERT_EQ(::lstat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/full was replaced by a regular file";
}

// A copy of the fixture trace as {dir}/NAME, and a verify that it still is byte for byte.
std::function<void(const fs::path&, const Fixtures&)> copy_trace(std::string name) {
  return [name](const fs::path& d, const Fixtures& fx) {
    fs::create_directories((d / name).parent_path());
    fs::copy_file(fx.trace, d / name);
  };
}
std::function<void(const fs::path&, const Fixtures&)> trace_unchanged(std::string name) {
  return [name](const fs::path& d, const Fixtures& fx) {
    EXPECT_EQ(read_file(d / name), read_file(fx.trace)) << name << " was changed";
  };
}

// The fixture trace with `line` as its second line.
std::function<void(const fs::path&, const Fixtures&)> trace_with_line(std::string line) {
  return [line](const fs::path& d, const Fixtures& fx) {
    const std::string t = read_file(fx.trace);
    write_file(d / "t.jsonl", t.substr(0, t.find('\n') + 1) + line + "\n");
  };
}

}  // namespace

std::vector<Case> hostile_io_cases() {
  const std::string kSpan = R"({"type":"span","ts":1,"rank":0,"dev":0,"step":0,"phase":"forward","name":"f",)"
                            R"("cat":"compute","stream":"compute","dur":5})";
  std::string deep_line = std::string(3000, '[') + std::string(3000, ']');
  return {
      // ---- FIFOs and devices as inputs: refused at once, never waited on ----
      {"TrainInitIsAFifo", kTrain + " --steps 1 --init {dir}/f", 2,
       "is a FIFO (named pipe), not a regular file", fifo_named("f")},
      {"TrainDataIsAFifo", "train --model 2-8-3 --batch 16 --steps 1 --data {dir}/f,{dir}/y.npy", 2,
       "is a FIFO (named pipe), not a regular file", fifo_named("f")},
      {"TrainInitIsACharacterDevice", kTrain + " --steps 1 --init /dev/zero", 2,
       "--init /dev/zero: is a character device, not a regular file"},
      {"TraceStatsOfAFifo", "trace stats {dir}/f.jsonl", 2, "is a FIFO (named pipe), not a regular file",
       fifo_named("f.jsonl")},
      {"TraceExportOfAFifo", "trace export --chrome {dir}/f.jsonl {dir}/out.json", 2, "is a FIFO",
       fifo_named("f.jsonl")},
      {"VizOfAFifo",
       "{dir}/f.jsonl --screenshot {dir}/s.png --size 320x200",
       1,
       "is a FIFO",
       fifo_named("f.jsonl"),
       {},
       {},
       kViz},
      {"TraceStatsSymlinkLoop", "trace stats {dir}/loop.jsonl", 2, "too many levels of symbolic links",
       [](const fs::path& d, const Fixtures&) { fs::create_symlink(d / "loop.jsonl", d / "loop.jsonl"); }},
      // ---- outputs that are inputs, other outputs, checkpoints or device nodes ----
      {"VizScreenshotOntoItsInput",
       "{dir}/t.jsonl --screenshot {dir}/t.jsonl --size 320x200",
       2,
       "is the same file as the input",
       copy_trace("t.jsonl"),
       {},
       {},
       kViz,
       seconds(30),
       1,
       trace_unchanged("t.jsonl")},
      {"VizStageBoxesOntoItsInput",
       "{dir}/t.jsonl --screenshot {dir}/s.png --stage-boxes {dir}/t.jsonl",
       2,
       "is the same file as the input",
       copy_trace("t.jsonl"),
       {},
       {},
       kViz,
       seconds(30),
       1,
       trace_unchanged("t.jsonl")},
      {"VizScreenshotIsARankFileOfItsDirectory",
       "{dir}/mpx --screenshot {dir}/mpx/rank-0.jsonl",
       2,
       "is one of the files the input",
       copy_trace("mpx/rank-0.jsonl"),
       {},
       {},
       kViz,
       seconds(30),
       1,
       trace_unchanged("mpx/rank-0.jsonl")},
      {"TrainTraceIntoAFifo",
       kTrain + " --steps 1 --trace {dir}/pipe",
       2,
       "is a FIFO (named pipe), not a regular file; refusing to write over it",
       fifo_named("pipe"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       still_fifo("pipe")},
      {"TrainSaveOntoACheckpoint",
       kTrain + " --steps 2 --save {dir}/ck/checkpoint-00000002.safetensors --checkpoint-dir {dir}/ck "
                "--checkpoint-every 1",
       2, "is a name --checkpoint-dir",
       [](const fs::path& d, const Fixtures&) { fs::create_directory(d / "ck"); }},
      {"TrainTraceOntoACheckpoint",
       kTrain + " --steps 2 --trace {dir}/ck/checkpoint-00000001.safetensors --checkpoint-dir {dir}/ck "
                "--checkpoint-every 1",
       2, "is a name --checkpoint-dir",
       [](const fs::path& d, const Fixtures&) { fs::create_directory(d / "ck"); }},
      {"TrainSaveToAFullDevice",
       kTrain + " --steps 1 --save /dev/full",
       1,
       "No space left on device",
       {},
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       dev_full_untouched},
      {"TraceExportToAFullDevice",
       "trace export --chrome {fx}/good.jsonl /dev/full",
       1,
       "No space left on device",
       {},
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       dev_full_untouched},
      {"TraceExportToDevNull", "trace export --chrome {fx}/good.jsonl /dev/null", 0, ""},
      {"BenchTraceIsAFifo",
       "bench all_reduce -b 1K -e 2K --trace {dir}/f.jsonl",
       2,
       "f.jsonl: is a FIFO (named pipe), not a regular file",
       fifo_named("f.jsonl"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       still_fifo("f.jsonl")},
      {"BenchTraceIsADirectory", "bench all_reduce -b 1K -e 2K --trace {dir}", 2,
       "is a directory; give a file name"},
      // ---- lesson outputs: the page, the trace, the snippet check (in --out DIR, the user's) ----
      {"LessonHandoutPageIsAFifo",
       "lesson handout 01-one-gpu {dir}/out --no-png",
       2,
       "01-one-gpu.md: is a FIFO (named pipe), not a regular file; refusing to write over it",
       fifo_named("out/01-one-gpu.md"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       still_fifo("out/01-one-gpu.md")},
      {"LessonRunTraceIsAFifo",
       "lesson run 01-one-gpu --no-viz --out {dir}/out",
       2,
       "01-one-gpu.trace.jsonl: is a FIFO (named pipe), not a regular file",
       fifo_named("out/01-one-gpu.trace.jsonl"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       still_fifo("out/01-one-gpu.trace.jsonl")},
      // lesson check reports it as the lesson's problem: exit code 1, one summary line naming it.
      {"LessonCheckSnippetIsAFifo",
       "lesson check 01-one-gpu --out {dir}/out",
       1,
       "01-one-gpu_snippet.py: is a FIFO (named pipe), not a regular file",
       fifo_named("out/01-one-gpu_snippet.py"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       still_fifo("out/01-one-gpu_snippet.py")},
      {"LessonHandoutPageIsASymlink",
       "lesson handout 01-one-gpu {dir}/out --no-png",
       0,
       "",
       link_to_precious("out/01-one-gpu.md"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       precious_kept("out/01-one-gpu.md")},
      {"TraceMergeIntoItsOwnDirectory",
       "trace merge {dir}/mpx {dir}/mpx/rank-1.jsonl",
       2,
       "is one of the files the input DIR",
       copy_trace("mpx/rank-0.jsonl"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures&) { EXPECT_FALSE(fs::exists(d / "mpx/rank-1.jsonl")); }},
      {"TraceExportIntoItsOwnDirectory",
       "trace export --chrome {dir}/mpx {dir}/mpx/rank-0.jsonl",
       2,
       "is one of the files the input IN",
       copy_trace("mpx/rank-0.jsonl"),
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       trace_unchanged("mpx/rank-0.jsonl")},
      // ---- empty values are refused, never read as 0 ----
      {"TrainEmptyLr", kTrain + " --steps 1 --lr {empty}", 2, "--lr: the value is empty"},
      {"TrainEmptyCheckpointEvery", kTrain + " --steps 1 --checkpoint-every {empty}", 2,
       "--checkpoint-every: the value is empty"},
      {"BenchEmptyIterations", "bench all_reduce -r {empty}", 2, "the value is empty"},
      {"BenchEmptyWarmup", "bench all_reduce -w {empty}", 2, "the value is empty"},
      {"BenchEmptySlices", "bench all_reduce --slices {empty}", 2, "--slices: the value is empty"},
      {"SamplerEmptyRank", "sampler --len 4 --rank {empty}", 2, "--rank: the value is empty"},
      {"SamplerEmptyEpoch", "sampler --len 4 --epoch {empty}", 2, "--epoch: the value is empty"},
      {"LaunchEmptyNproc", "launch --nproc {empty} -- /bin/true", 2, "--nproc: the value is empty"},
      {"SamplerSeedMinusOne", "sampler --len 4 --seed -1", 2,
       "must be an integer from 0 to 18446744073709551615, got '-1'"},
      // ---- the true reason ----
      {"TraceRankPast32Bits", "trace stats {dir}/t.jsonl", 2,
       "field 'rank' is 1099511627776, more than the largest",
       trace_with_line(R"({"type":"span","ts":1,"rank":1099511627776,"dev":0,"step":0,"phase":"forward",)"
                       R"("name":"f","cat":"compute","stream":"compute","dur":5})")},
      {"TraceNumberPast64Bits", "trace stats {dir}/t.jsonl", 2, "does not fit in 64 bits",
       trace_with_line(R"({"type":"span","ts":123456789012345678901234567890,"rank":0,"dev":0,"step":0,)"
                       R"("phase":"forward","name":"f","cat":"compute","stream":"compute","dur":5})")},
      {"TraceNestedTooDeeply", "trace stats {dir}/t.jsonl", 2, "nested too deeply",
       trace_with_line(deep_line)},
      {"TraceRankFileNamedMinusOne", "trace stats {dir}/mpx", 2, "has no rank-K.jsonl files",
       copy_trace("mpx/rank--1.jsonl")},
      {"TraceCompressedRankFileCutOff", "trace stats {dir}/mpx", 2, "the zstd frame is cut off",
       [](const fs::path& d, const Fixtures&) {
         fs::create_directories(d / "mpx");
         // The start of a zstd frame (magic, frame header) and nothing decodable after it.
         write_file(d / "mpx" / "rank-0.jsonl.zst", std::string("\x28\xb5\x2f\xfd\x04\x58\x05\x00", 8));
       }},
  };
}

}  // namespace dpscope::testing
