// `dpscope trace`: tools for dpscope traces (docs/trace-format.md).
//   dpscope trace export --chrome IN OUT.json   Chrome Trace Event JSON for ui.perfetto.dev
//   dpscope trace stats IN [--per-step]         compute / comm / exposed comm / idle per device, and
//                                               for DDP the straggler, exposed all-reduce, buckets, set_epoch
//   dpscope trace merge DIR OUT.jsonl           process ranks' rank-K.jsonl on rank 0's clock
//   dpscope trace import IN OUT                 torch.profiler (Kineto) traces as a dpscope trace
// IN is a trace file or a directory of process ranks' rank-K.jsonl files, merged as it is read
// (trace_tools/rank_traces.hpp). export and stats read strictly (the first malformed line is an
// error, exit code 2) unless --lenient is given, which skips malformed lines and lists them on stderr.
// Every path, name and reason printed comes from the user or a file: it is written out through
// printable_line() (base/terminal_text.hpp), so no control character reaches the terminal.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/trace/merge.hpp"
#include "dpscope/trace_tools/chrome_export.hpp"
#include "dpscope/trace_tools/ddp_diagnosis.hpp"
#include "dpscope/trace_tools/kineto_import.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/trace_tools/stats.hpp"

namespace dpscope::cli {

namespace {

constexpr size_t kProblemsShown = 10;

// `trace export --chrome X X` used to overwrite its own input. OUT may not be IN by another spelling
// either (./X, a symlink, a hard link), nor, when IN is a directory of per-rank traces, one of the
// files in it; nor a directory, a FIFO or a device node (base/file_guard.hpp). Checked before IN is read.
void check_output(const std::string& in, const std::string& out) {
  OutputGuard guard;
  if (path_status(in).kind == FileKind::kDirectory) {
    guard.add_input_dir("IN", in,
                        [](std::string_view name) { return trace::rank_of_file_name(name).has_value(); });
    for (const auto& [rank, file] : trace::list_rank_files(in))
      guard.add_input(fmt::format("IN's rank {} trace", rank), file);
  } else {
    guard.add_input("IN", in);
  }
  guard.add_output("OUT", out);
  guard.check();
}

// Each rank's clock against rank 0's, one line each (a directory's ranks, `trace merge`).
void print_rank_clocks(const std::vector<trace::RankSource>& ranks) {
  for (const trace::RankSource& r : ranks)
    fmt::print("  rank {}: clock offset {:+.1f} us (+/- {:.1f} us)\n", r.rank, r.clock_offset_ns / 1e3,
               r.clock_uncertainty_ns / 1e3);
}

// One warning line per file whose incomplete last line was left out.
void warn_partial(const std::vector<std::string>& files) {
  for (const std::string& file : files) {
    std::fprintf(
        stderr, "dpscope: warning: %s ends with an incomplete line (still being written?); it was left out\n",
        printable_line(file).c_str());
  }
}

trace::TraceData load(const std::string& path, bool lenient) {
  trace::TraceData data = trace::read_trace(path, {.strict = !lenient});
  for (size_t i = 0; i < data.problems.size() && i < kProblemsShown; ++i) {
    const trace::Problem& p = data.problems[i];
    std::fprintf(
        stderr, "dpscope: warning: skipped %s\n",
        printable_line(fmt::format("{}:{}: {}", p.file.empty() ? path : p.file, p.line, p.reason)).c_str());
  }
  if (data.problems.size() > kProblemsShown) {
    std::fprintf(stderr, "dpscope: warning: ... and %zu more malformed lines\n",
                 data.problems.size() - kProblemsShown);
  }
  std::vector<std::string> partial;  // the files that end with an incomplete line
  if (data.ranks.empty() && data.partial_last_line) partial.push_back(path);
  for (const trace::RankSource& r : data.ranks)
    if (r.partial_last_line) partial.push_back(r.path);
  warn_partial(partial);
  return data;
}

// `dpscope trace import IN OUT` (docs/pytorch-import.md): one torch.profiler trace -> the trace file
// OUT; a directory of them (one per rank) -> OUT/rank-K.jsonl. OUT is checked before anything is read:
// no input is overwritten, and a directory output is never a file nor a file output a directory.
void register_trace_import(CLI::App* trace_cmd) {
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* import_cmd = trace_cmd->add_subcommand(
      "import", "convert torch.profiler (Kineto) Chrome traces of a PyTorch run into a dpscope trace");
  import_cmd
      ->add_option("IN", *in,
                   "a torch.profiler trace (*.pt.trace.json), or a directory of them, one per rank")
      ->required();
  import_cmd
      ->add_option("OUT", *out, "the dpscope trace (.jsonl); for several ranks a directory of rank-K.jsonl")
      ->required();
  import_cmd->callback([in, out] {
    const std::vector<std::filesystem::path> files = trace::list_kineto_files(*in);
    OutputGuard guard;
    for (const std::filesystem::path& f : files) guard.add_input("IN", f);
    if (files.size() > 1) {
      DPS_CHECK(
          path_status(*out).kind == FileKind::kMissing || path_status(*out).kind == FileKind::kDirectory,
          ErrorKind::kUsage,
          "OUT '{}' is not a directory: the {} traces of IN are written as OUT/rank-K.jsonl, one per rank",
          *out, files.size());
      guard.add_output_dir("OUT", *out,
                           [](std::string_view name) { return trace::rank_of_file_name(name).has_value(); });
    } else {
      guard.add_output("OUT", *out);
    }
    guard.check();
    const trace::KinetoImportResult r = trace::import_kineto(*in, *out);
    uint64_t events = 0;
    for (const trace::KinetoRankSummary& k : r.ranks) events += k.events;
    fmt::print("wrote {} ({} {}, {} events)\n", printable_line(*out), r.ranks.size(),
               r.ranks.size() == 1 ? "rank" : "ranks", events);
    for (const trace::KinetoRankSummary& k : r.ranks) {
      fmt::print(
          "  rank {}: {} -> {}: {} steps (ProfilerStep#{} is step 0), {} collectives, {} bucket "
          "assignments, {} grad_ready\n",
          k.rank, printable_line(k.source.string()), printable_line(k.written.string()), k.steps,
          k.first_profiler_step, k.collectives, k.bucket_assignments, k.grad_ready);
    }
  });
}

}  // namespace

void register_trace(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("trace", "export dpscope traces or summarize them");
  // One line naming the subcommands instead of CLI11's "A subcommand is required".
  cmd->require_subcommand(0, 1);
  cmd->callback([cmd] {
    DPS_CHECK(!cmd->get_subcommands().empty(), ErrorKind::kUsage,
              "trace needs a subcommand: stats IN, export --chrome IN OUT, merge DIR OUT or import IN OUT");
  });

  struct ExportOptions {
    bool chrome = false;
    bool lenient = false;
    std::string in;
    std::string out;
  };
  auto export_options = std::make_shared<ExportOptions>();
  CLI::App* export_cmd = cmd->add_subcommand("export", "convert a trace for other viewers");
  export_cmd
      ->add_flag("--chrome", export_options->chrome,
                 "Chrome Trace Event JSON (ui.perfetto.dev, chrome://tracing)")
      ->required();
  export_cmd->add_flag("--lenient", export_options->lenient, "skip malformed lines instead of failing");
  export_cmd
      ->add_option("IN", export_options->in, "the dpscope trace (.jsonl, or a directory of rank-K.jsonl)")
      ->required();
  export_cmd->add_option("OUT", export_options->out, "where to write the Chrome JSON")->required();
  export_cmd->callback([export_options] {
    check_output(export_options->in, export_options->out);
    const trace::TraceData data = load(export_options->in, export_options->lenient);
    trace::export_chrome(data, std::filesystem::path(export_options->out));
    fmt::print("wrote {} ({} trace events as Chrome Trace Event JSON)\nopen it at https://ui.perfetto.dev\n",
               printable_line(export_options->out), data.events.size());
  });

  auto merge_in = std::make_shared<std::string>();
  auto merge_out = std::make_shared<std::string>();
  CLI::App* merge_cmd = cmd->add_subcommand(
      "merge", "put the per-rank traces of process ranks (DIR/rank-K.jsonl) on one timeline");
  merge_cmd
      ->add_option("DIR", *merge_in, "the directory of rank-K.jsonl files (train --backend mpi --trace DIR)")
      ->required();
  merge_cmd->add_option("OUT", *merge_out, "the merged trace (.jsonl)")->required();
  merge_cmd->callback([merge_in, merge_out] {
    const trace::MergeResult r = trace::merge_rank_traces(*merge_in, *merge_out);
    std::vector<std::string> partial;
    for (const std::filesystem::path& file : r.partial) partial.push_back(file.string());
    warn_partial(partial);
    fmt::print("wrote {} ({} ranks, {} events on rank 0's clock)\n", printable_line(*merge_out), r.ranks,
               r.events);
    print_rank_clocks(r.clocks);
  });

  register_trace_import(cmd);

  struct StatsOptions {
    bool per_step = false;
    bool lenient = false;
    std::string in;
  };
  auto stats_options = std::make_shared<StatsOptions>();
  CLI::App* stats_cmd =
      cmd->add_subcommand("stats", "time breakdown per device: compute, comm, exposed comm, idle");
  stats_cmd->add_flag("--per-step", stats_options->per_step, "also break the time down per training step");
  stats_cmd->add_flag("--lenient", stats_options->lenient, "skip malformed lines instead of failing");
  stats_cmd->add_option("IN", stats_options->in, "the dpscope trace (.jsonl, or a directory of rank-K.jsonl)")
      ->required();
  stats_cmd->callback([stats_options] {
    const trace::TraceData data = load(stats_options->in, stats_options->lenient);
    const trace::TraceStats stats = trace::compute_stats(data, stats_options->per_step);
    // What the trace names (devices, parameters, its clock) is written out, not sent to the terminal
    // raw: a device named "sim\x1b]0;...\x07" retitled the user's window (base/terminal_text.hpp).
    fmt::print(
        "{}", printable_text(fmt::format("{}: {} events, {} clock, {} devices\n", stats_options->in,
                                         data.events.size(), data.header.clock, data.header.devices.size())));
    if (!data.ranks.empty()) {
      fmt::print("{} process ranks (rank-K.jsonl) on rank 0's clock:\n", data.ranks.size());
      print_rank_clocks(data.ranks);
    }
    fmt::print("{}", printable_text(trace::format_stats(stats, data, stats_options->per_step)));
    // DDP traces: the straggler, exposed communication, buckets and sampler findings (nothing else).
    fmt::print("{}",
               printable_text(trace::format_diagnosis(trace::diagnose_ddp(data), stats_options->per_step)));
  });
}

}  // namespace dpscope::cli
