// Hostile-input rows of the fourth pass: hardware presets a user writes (DPSCOPE_ASSETS), empty
// values of dpscope-viz's options, a followed trace that is not there, `sampler --seed` past 64
// bits, fidelity_report's table header values, and a trace line of hundreds of MiB. Each row failed
// before its fix (docs/reliability.md, "Fourth pass").
#include <sys/stat.h>
#include <zstd.h>

#include "cli/hostile_input.hpp"

namespace dpscope::testing {

namespace {

// A complete preset (a PCIe box as t4.toml, without its optional tables) whose line starting with
// `key = ` is replaced by `key = value`, or with `extra` appended; written as {dir}/presets/bad.toml,
// which DPSCOPE_ASSETS={dir} makes `--preset bad`.
std::function<void(const fs::path&, const Fixtures&)> preset(std::string key, std::string value,
                                                             std::string extra = "") {
  return [key, value, extra](const fs::path& d, const Fixtures&) {
    const std::string lines[] = {"name = \"a hostile preset\"",
                                 "memory_gb = 16.0",
                                 "memory_bandwidth_gbps = 320.0",
                                 "fp32_tflops = 8.1",
                                 "launch_latency_us = 5.0",
                                 "topology = \"pcie-host\"",
                                 "[host_link]",
                                 "kind = \"pcie3\"",
                                 "bandwidth_gbps = 16.0",
                                 "latency_us = 1.5",
                                 "[peer_link]",
                                 "kind = \"pcie3\"",
                                 "bandwidth_gbps = 16.0",
                                 "latency_us = 2.0"};
    std::string text, table;
    for (const std::string& line : lines) {
      if (line[0] == '[') table = line.substr(1, line.size() - 2) + ".";
      const bool replaced = (table + line).rfind(key + " = ", 0) == 0;
      text += (replaced ? line.substr(0, line.find(" = ")) + " = " + value : line) + "\n";
    }
    fs::create_directories(d / "presets");
    write_file(d / "presets" / "bad.toml", text + extra);
  };
}
const std::map<std::string, std::string> kAssets = {{"DPSCOPE_ASSETS", "{dir}"}};
const std::string kTwoGpus = kTrain + " --steps 1 --mode ddp --devices 2 --preset bad";

// A two-GPU all_reduce table as {dir}/tables/t.csv with `extra` header lines after the usual ones.
std::function<void(const fs::path&, const Fixtures&)> table_with(std::string extra) {
  return [extra](const fs::path& d, const Fixtures&) {
    fs::create_directories(d / "tables");
    write_file(d / "tables" / "t.csv",
               "# system: two GPUs\n# source: a test\n# command: all_reduce_perf -b 8 -e 1M -g 2\n"
               "# preset: rtx-2080ti\n# gpus_per_node: 2\n# nodes: 1\n# collective: all_reduce\n" +
                   extra + "size_bytes,time_us,algbw_gbps,busbw_gbps\n1024,12.1,0.08,0.08\n");
  };
}

// A zstd bomb as `file`: the fixture trace's header line (unless `header` is false), then
// `spaces_mib` MiB of `filler` (spaces: one line without a '\n'), compressed to well under a MiB.
void write_zstd_bomb(const fs::path& path, const Fixtures& fx, size_t spaces_mib, bool with_header = true,
                     char filler = ' ') {
  const std::string t = read_file(fx.trace);
  const std::string header = with_header ? t.substr(0, t.find('\n') + 1) : std::string();
  const std::string spaces(size_t{1} << 20, filler);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  std::string out(ZSTD_CStreamOutSize(), '\0'), file;
  auto feed = [&](const std::string& text, ZSTD_EndDirective end) {
    ZSTD_inBuffer in{text.data(), text.size(), 0};
    for (bool done = false; !done;) {
      ZSTD_outBuffer dst{out.data(), out.size(), 0};
      const size_t left = ZSTD_compressStream2(cctx, &dst, &in, end);
      ASSERT_FALSE(ZSTD_isError(left)) << ZSTD_getErrorName(left);
      file.append(out.data(), dst.pos);
      done = end == ZSTD_e_end ? left == 0 : in.pos == in.size;
    }
  };
  feed(header, ZSTD_e_continue);
  for (size_t i = 0; i < spaces_mib; ++i) feed(spaces, ZSTD_e_continue);
  feed("", ZSTD_e_end);
  ZSTD_freeCCtx(cctx);
  ASSERT_LT(file.size(), size_t{1} << 20) << "not much of a bomb";
  write_file(path, file);
}

Case report_row(std::string name, std::string extra, std::string expected) {
  return {std::move(name),
          "{dir}/tables {dir}/o.md",
          2,
          std::move(expected),
          table_with(std::move(extra)),
          {},
          {},
          kReport};
}

Case viz_row(std::string name, std::string args, int exit_code, std::string expected,
             std::function<void(const fs::path&, const Fixtures&)> setup = {}) {
  return {std::move(name), std::move(args), exit_code, std::move(expected), std::move(setup), {}, {}, kViz};
}

}  // namespace

std::vector<Case> hostile_pass4_cases() {
  return {
      // ---- presets: every number in its range when the preset loads ----
      // A negative or NaN launch latency made a kernel of negative duration: an internal check
      // thrown on a rank thread, "terminate called after throwing an instance of 'dpscope::Error'"
      // (SIGABRT); NaN even "terminate called recursively".
      {"PresetLaunchLatencyNegative", kTwoGpus, 2,
       "presets/bad.toml: 'launch_latency_us' is -5, it must be a number in [0, 1000000]",
       preset("launch_latency_us", "-5.0"), kAssets},
      {"PresetLaunchLatencyNotANumber", kTwoGpus, 2, "'launch_latency_us' is nan, it must be a number in [0",
       preset("launch_latency_us", "nan"), kAssets},
      {"PresetLaunchLatencyHuge", kTwoGpus, 2, "'launch_latency_us' is 1e+308, it must be a number in [0",
       preset("launch_latency_us", "1e308"), kAssets},
      // "rank 0 failed: internal check 'dur_ns >= 0' failed: negative duration -9223372036854775808 ns".
      {"PresetHostLinkBandwidthNotANumber", kTwoGpus, 2,
       "'host_link.bandwidth_gbps' is nan, it must be a number in (0, 1000000]",
       preset("host_link.bandwidth_gbps", "nan"), kAssets},
      // Accepted without a word: a negative latency, an infinite bandwidth, a NaN memory size (cast
      // to an integer: undefined behaviour).
      {"PresetPeerLatencyNegative", kTwoGpus, 2, "'peer_link.latency_us' is -2, it must be a number in [0",
       preset("peer_link.latency_us", "-2.0"), kAssets},
      {"PresetPeerBandwidthInfinite", kTwoGpus, 2, "'peer_link.bandwidth_gbps' is inf",
       preset("peer_link.bandwidth_gbps", "inf"), kAssets},
      {"PresetMemoryNotANumber", kTwoGpus, 2, "'memory_gb' is nan, it must be a number in (0, 1000000]",
       preset("memory_gb", "nan"), kAssets},
      {"PresetMemoryBandwidthInfinite", kTwoGpus, 2, "'memory_bandwidth_gbps' is inf",
       preset("memory_bandwidth_gbps", "inf"), kAssets},
      {"PresetFlopsZero", kTwoGpus, 2, "'fp32_tflops' is 0, it must be a number in (0, 1000000]",
       preset("fp32_tflops", "0.0"), kAssets},
      // A count of 1e308 was cast to an int: "(pcie-host topology) holds -2147483648 GPUs".
      {"PresetMaxGpusHuge", kTwoGpus, 2,
       "'network.max_gpus' is 1e+308, it must be a whole number from 0 to 1024",
       preset("", "", "[network]\nmax_gpus = 1e308\n"), kAssets},
      {"PresetGpusPerSwitchNegative", kTwoGpus, 2,
       "'network.gpus_per_switch' is -3, it must be a whole number from 0 to 1024",
       preset("", "", "[network]\ngpus_per_switch = -3\n"), kAssets},
      // 4294967297 links became 1 (narrowed to an int).
      {"PresetNvlinkCountPast32Bits", kTwoGpus, 2, "bad network.nvlinks entry [0, 1, 4294967297]",
       preset("", "", "[network]\nnvlinks = [[0, 1, 4294967297]]\n"), kAssets},
      // A FIFO or a directory named bad.toml was "unknown preset 'bad' (available: bad)".
      {"PresetIsAFifo", kTwoGpus, 2, "cannot read preset '{dir}/presets/bad.toml': is a FIFO",
       [](const fs::path& d, const Fixtures&) {
         fs::create_directories(d / "presets");
         ASSERT_EQ(::mkfifo((d / "presets" / "bad.toml").c_str(), 0600), 0);
       },
       kAssets},
      {"PresetIsADirectory", kTwoGpus, 2, "cannot read preset '{dir}/presets/bad.toml': is a directory",
       [](const fs::path& d, const Fixtures&) { fs::create_directories(d / "presets" / "bad.toml"); },
       kAssets},
      // ---- dpscope-viz: no option takes an empty value ----
      // `--screenshot ''` was no screenshot: the window opened and waited for ever under xvfb-run.
      viz_row("VizScreenshotEmpty", "{fx}/good.jsonl --screenshot {empty}", 2,
              "--screenshot: the value is empty"),
      // `--seek ''` and `--size ''` were their defaults.
      viz_row("VizSeekEmpty", "{fx}/good.jsonl --screenshot {dir}/s.png --seek {empty}", 2,
              "--seek: the value is empty"),
      viz_row("VizSizeEmpty", "{fx}/good.jsonl --screenshot {dir}/s.png --size {empty}", 2,
              "--size: the value is empty"),
      // A followed path that is not there yet: one frame cannot wait ("no complete header line yet").
      viz_row("VizFollowMissingScreenshot",
              "--follow {dir}/absent.jsonl --screenshot {dir}/s.png --size 320x200", 1,
              "absent.jsonl: no such file or directory"),
      // A followed FIFO or empty directory said "no complete header line yet" too, hiding the reason
      // the follower waits (without --follow the same paths get their own message).
      viz_row("VizFollowFifoScreenshot", "--follow {dir}/f --screenshot {dir}/s.png --size 320x200", 1,
              "cannot read trace '{dir}/f': is a FIFO (named pipe), not a regular file",
              [](const fs::path& d, const Fixtures&) { ASSERT_EQ(::mkfifo((d / "f").c_str(), 0600), 0); }),
      viz_row("VizFollowEmptyDirectoryScreenshot",
              "--follow {dir}/run --screenshot {dir}/s.png --size 320x200", 1,
              "run: no rank's trace (rank-K.jsonl) has a complete header line yet",
              [](const fs::path& d, const Fixtures&) { fs::create_directories(d / "run"); }),
      // A trace of its header alone: "--seek event:0: the trace has 0 events (event:0..0)".
      viz_row("VizSeekEventInATraceOfNoEvents", "{dir}/t.jsonl --screenshot {dir}/s.png --seek event:0", 2,
              "--seek event:0: the trace has no events",
              [](const fs::path& d, const Fixtures& fx) {
                const std::string t = read_file(fx.trace);
                write_file(d / "t.jsonl", t.substr(0, t.find('\n') + 1));
              }),
      // ---- sampler: a seed past 64 bits ----
      // 2^64 and more became 2^64 - 1 (CLI11 saturates), printing that seed's order.
      {"SamplerSeedPast64Bits", "sampler --len 4 --seed 18446744073709551616", 2,
       "must be an integer from 0 to 18446744073709551615, got '18446744073709551616'"},
      // Every integer option alike: past 64 bits CLI11 kept the saturated value (a run of
      // 9223372036854775807 steps, a message quoting a number nobody typed).
      {"TrainStepsPast64Bits", "train --dataset spirals:64 --model 2-4-3 --steps 99999999999999999999999", 2,
       "--steps: must be an integer from -9223372036854775808 to 9223372036854775807, got "
       "'99999999999999999999999'"},
      {"TrainBatchBelowInt64",
       "train --dataset spirals:64 --model 2-4-3 --steps 1 --batch -9223372036854775809", 2,
       "--batch: must be an integer from -9223372036854775808 to 9223372036854775807, got "
       "'-9223372036854775809'"},
      {"SamplerEpochPast64Bits", "sampler --len 10 --epoch 99999999999999999999", 2,
       "--epoch: must be an integer from -9223372036854775808 to 9223372036854775807, got "
       "'99999999999999999999'"},
      {"SamplerRankPast64Bits", "sampler --len 10 --replicas 2 --rank 99999999999999999999", 2,
       "--rank: must be an integer from -9223372036854775808 to 9223372036854775807"},
      // ---- fidelity_report: header values in range, known keys once ----
      // A negative median_bound was accepted (every table then "fails" its own bound).
      report_row("FidelityReportMedianBoundNegative", "# median_bound: -0.1\n",
                 "t.csv:8: median_bound '-0.1' must be in (0, 1]"),
      report_row("FidelityReportMedianBoundAbsurd", "# median_bound: 1e300\n",
                 "t.csv:8: median_bound '1e300' must be in (0, 1]"),
      report_row("FidelityReportMedianBoundNotANumber", "# median_bound: nan\n",
                 "t.csv:8: median_bound 'nan' is not a number"),
      // A negative nic_latency_us is the "use the preset's" sentinel: a typed -3 was silently ignored.
      report_row("FidelityReportNicLatencyNegative", "# nic_latency_us: -3\n",
                 "t.csv:8: nic_latency_us '-3' must be in [0, 1000000]"),
      report_row("FidelityReportNicBandwidthZero", "# nic_gbps: 0\n",
                 "t.csv:8: nic_gbps '0' must be in (0, 1000000]"),
      report_row("FidelityReportNvlsLatencyAbsurd", "# nvls_latency_us: 1e9\n# nvls_latency_note: x\n",
                 "t.csv:8: nvls_latency_us '1e9' must be in [0, 1000]"),
      // A typo was ignored and the default bound used; a key given twice kept its last value.
      report_row("FidelityReportUnknownHeaderKey", "# median_bnd: 0.1\n",
                 "t.csv:8: unknown header key 'median_bnd' (expected one of: system, source"),
      report_row("FidelityReportHeaderKeyTwice", "# nodes: 2\n",
                 "t.csv:8: header key 'nodes' is given twice (first on line 6)"),
      // ---- lesson run: the output directory ----
      // `--out FILE` said only "cannot create the output directory FILE".
      {"LessonRunOutIsAFile", "lesson run 01 --no-viz --out {dir}/f", 2,
       "cannot create the output directory {dir}/f: it is a regular file, not a directory",
       [](const fs::path& d, const Fixtures&) { write_file(d / "f", "a file"); }},
      // ---- a trace line of hundreds of MiB ----
      // A header and then 300 MiB without a '\n' (sparse: no disk used). Such a line (a zstd bomb of
      // 92 KiB decodes to a 3 GB one) was gathered into memory twice its size (5.8 GB resident)
      // and then read as "0 events" (exit 0).
      {"TraceStatsLineOfHundredsOfMebibytes", "trace stats {dir}/t.jsonl", 2,
       "t.jsonl:2: a line longer than 256 MiB",
       [](const fs::path& d, const Fixtures& fx) {
         const std::string t = read_file(fx.trace);
         write_file(d / "t.jsonl", t.substr(0, t.find('\n') + 1) + " ");
         fs::resize_file(d / "t.jsonl", uintmax_t{300} << 20);
       }},
      // The same line compressed: 300 MiB of spaces in a few KiB of zstd were decoded in one piece
      // (a 3 GB line: 5.8 GB resident) before any line was looked at; now in pieces of 32 MiB.
      {"TraceStatsZstdBomb", "trace stats {dir}/t.jsonl.zst", 2, "t.jsonl.zst:2: a line longer than 256 MiB",
       [](const fs::path& d, const Fixtures& fx) { write_zstd_bomb(d / "t.jsonl.zst", fx, 300); }},
      {"TraceExportZstdBomb",
       "trace export --chrome {dir}/t.jsonl.zst {dir}/out.json",
       2,
       "t.jsonl.zst:2: a line longer than 256 MiB",
       [](const fs::path& d, const Fixtures& fx) { write_zstd_bomb(d / "t.jsonl.zst", fx, 300); },
       {},
       {},
       DPSCOPE_CLI,
       seconds(30),
       1,
       [](const fs::path& d, const Fixtures&) {
         EXPECT_FALSE(fs::exists(d / "out.json")) << "an export was written from a refused trace";
       }},
      // Followed, it was decoded whole at the first poll (4.4 GB) and shown as a trace of no events.
      viz_row("VizFollowZstdBomb", "--follow {dir}/t.jsonl.zst --screenshot {dir}/s.png --size 320x200", 1,
              "t.jsonl.zst:2: a line longer than 256 MiB",
              [](const fs::path& d, const Fixtures& fx) { write_zstd_bomb(d / "t.jsonl.zst", fx, 300); }),
      // A rank file's header line is looked for in its first bytes: 64 KiB of a bomb were decoded
      // whole (2 GB) before the '\n' was searched for.
      {"TraceStatsRankFileZstdBomb", "trace stats {dir}/run", 2,
       "run/rank-0.jsonl.zst:1: a line longer than 256 MiB",
       [](const fs::path& d, const Fixtures& fx) {
         fs::create_directories(d / "run");
         write_zstd_bomb(d / "run" / "rank-0.jsonl.zst", fx, 300, /*with_header=*/false);
       }},
      // Blank lines, which a reader skips, each short: 32 GB of them in 981 KB of zstd were read on
      // past any time limit. A stream that decodes to more than 1000 times its size is refused once
      // past 1 GiB (a trace compresses about 10 times).
      {"TraceStatsZstdBombOfBlankLines", "trace stats {dir}/t.jsonl.zst", 2,
       "t.jsonl.zst: decodes to more than 1000 times its compressed size",
       [](const fs::path& d, const Fixtures& fx) {
         write_zstd_bomb(d / "t.jsonl.zst", fx, 1100, /*with_header=*/true, '\n');
       }},
      viz_row("VizZstdBomb", "{dir}/t.jsonl.zst --screenshot {dir}/s.png --size 320x200", 1,
              "t.jsonl.zst:2: a line longer than 256 MiB",
              [](const fs::path& d, const Fixtures& fx) { write_zstd_bomb(d / "t.jsonl.zst", fx, 300); }),
  };
}

}  // namespace dpscope::testing
