// `dpscope train`: flags → TrainConfig → run_training(), with a progress bar and a summary. Also
// where the old `--backend cpu|sim` (which named the device) is mapped to `--device`, with a note.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/standard_descriptors.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope::cli {
namespace {

// What `dpscope train` prints on stdout: the step lines and the summary. A full disk or a closed
// stdout loses those lines, not the run: training goes on to its end (the trace, the checkpoints and
// --save are written; stopping at the first line lost them all), stderr says so at once, and the
// command then fails naming the loss (exit code 1).
class StdoutLines {
 public:
  void print(std::string_view text) {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0) return;
    if (lost_ != 0) return;
    lost_ = errno != 0 ? errno : EIO;
    std::fprintf(
        stderr,
        "dpscope: warning: cannot write standard output: %s; the run goes on (its trace, checkpoints "
        "and --save are written) and ends with exit code 1\n",
        std::strerror(lost_));
  }
  // Throws kWriteFailed "cannot write standard output: REASON (...)" if a line was lost.
  void finish() const {
    if (lost_ != 0)
      throw output_lost("standard output", lost_, "the run ended; what it printed there is incomplete");
  }

 private:
  int lost_ = 0;  // the errno of the first line lost
};

// One line that redraws itself on a terminal; plain lines (about ten per run) otherwise.
class Progress {
 public:
  Progress(bool tty, bool timing_only, StdoutLines& out) : tty_(tty), timing_only_(timing_only), out_(out) {}

  void update(const StepReport& report) {
    const int64_t done = report.step + 1;
    if (timing_only_) {  // no data, no loss: the simulated step time is what a step yields
      out_.print(fmt::format("step {}/{}  simulated {:.3f} ms\n", done, report.total_steps,
                             report.sim_step_ns / 1e6));
      return;
    }
    // The step's loss, defined as the summary's (in ddp: the mean over ranks).
    const char* loss_label = "loss";
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(report.total_steps, 1));
      std::fprintf(stderr, "\r[%s%s] step %lld/%lld  epoch %lld  %s %.4f ", std::string(filled, '#').c_str(),
                   std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(done),
                   static_cast<long long>(report.total_steps), static_cast<long long>(report.epoch),
                   loss_label, report.loss);
      if (done == report.total_steps) std::fputc('\n', stderr);
      std::fflush(stderr);
    } else {
      const int64_t every = std::max<int64_t>(1, report.total_steps / 10);
      if (done % every == 0 || done == report.total_steps || report.step == 0)
        out_.print(fmt::format("step {}/{}  epoch {}  {} {:.6f}\n", done, report.total_steps, report.epoch,
                               loss_label, report.loss));
    }
  }

 private:
  bool tty_;
  bool timing_only_;
  StdoutLines& out_;
};

// Appends one formatted piece of the summary to `out`.
template <typename... Args>
void add(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

// --timing-only: the world, the step against one GPU's, and where the time went.
void format_scaling(std::string& out, const TrainConfig& config, const TrainResult::Scaling& s) {
  add(out, "timing-only world: {}\n", s.world);
  add(out,
      "step {:.3f} ms on {} GPUs vs {:.3f} ms on one GPU: {:.3f} ms of communication not hidden by "
      "backward\n",
      s.step_ns / 1e6, config.devices, s.one_gpu_step_ns / 1e6, s.exposed_comm_ns / 1e6);
  add(out,
      "scaling efficiency {:.1f}% (weak scaling: {} GPUs process {:.0f}x one GPU's samples per second)\n",
      s.efficiency * 100.0, config.devices, s.efficiency * config.devices);
}

// The summary names what the user gave (paths, the model, a preset's name from its file): it is
// written out through printable_text() (base/terminal_text.hpp), no control character reaching the
// terminal.
void print_summary(const TrainConfig& config, const TrainResult& result, StdoutLines& lines) {
  std::string out;
  add(out, "\n== dpscope train: {} on {} ==\n", name(config.mode), result.device_name);
  add(out, "model {} ({} parameters), loss {}, optimizer {} (lr {})\n", config.model, result.parameter_count,
      config.loss, config.optim, config.lr);
  add(out, "{}\n", describe_batch(config, result));
  if (!result.losses.empty())
    add(out, "{}: first {:.6f}, final {:.6f}\n", runs_ranks(config.mode) ? "mean loss over ranks" : "loss",
        result.losses.front(), result.losses.back());
  const double steps_per_s = result.wall_seconds > 0 ? result.steps / result.wall_seconds : 0.0;
  add(out, "wall time {:.3f} s ({:.1f} steps/s on this machine)\n", result.wall_seconds, steps_per_s);
  if (result.sim_total_ns > 0 && result.steps > 0 && config.device == DeviceKind::kSim)
    add(out, "simulated time {:.3f} ms ({:.1f} us per step on {})\n", result.sim_total_ns / 1e6,
        result.sim_total_ns / 1e3 / static_cast<double>(result.steps), config.preset);
  if (result.scaling) format_scaling(out, config, *result.scaling);
  if (result.resumed_from_step >= 0)
    add(out, "resumed after step {} from {}\n", result.resumed_from_step, config.checkpoint_dir);
  if (!result.last_checkpoint.empty()) {
    add(out, "checkpoint: {}\n", result.last_checkpoint);
  } else if (!config.checkpoint_dir.empty() && config.no_sync_every > 1) {  // (ddp's flag)
    add(out, "checkpoint: none written (one needs a synchronized step: a multiple of --no-sync-every {})\n",
        config.no_sync_every);
  }
  if (!config.save.empty()) add(out, "weights saved to {}\n", config.save);
  if (!result.trace_path.empty() && config.one_process_per_rank()) {
    add(out, "traces: {}/rank-K.jsonl{}, one per rank on its own clock\n", config.trace,
        config.trace_zstd ? ".zst" : "");
    add(out, "  watch them as one run: dpscope-viz {}\n", config.trace);
    add(out, "  per-device stats:      dpscope trace stats {}\n", config.trace);
    add(out, "  one merged file:       dpscope trace merge {0} {0}/merged.jsonl\n", config.trace);
  } else if (!result.trace_path.empty()) {
    add(out, "trace: {} ({} events)\n", result.trace_path, result.trace_events);
    add(out, "  export for Perfetto:  dpscope trace export --chrome {} {}.perfetto.json\n", result.trace_path,
        std::filesystem::path(result.trace_path).replace_extension().string());
    add(out, "  per-device stats:     dpscope trace stats {}\n", result.trace_path);
  }
  lines.print(printable_text(out));
}

// Flags whose meaning changed or whose value CLI11 would take wrongly, resolved after parsing.
struct FlagsGiven {
  // --mode, --device and --backend as given; parse_flag_words() turns them into the config's enums
  // once the older spelling is adopted and the other flags are resolved (the order of the errors
  // a command line with several mistakes gets).
  std::string mode_text = "single";
  std::string device_text = "sim";
  std::string backend_text = "sim";
  CLI::Option* device = nullptr;
  CLI::Option* backend = nullptr;
  CLI::Option* steps = nullptr;
  CLI::Option* epochs = nullptr;
  CLI::Option* timeout = nullptr;
  std::string seed_text = "0";  // parsed here: CLI11 would wrap "-1" into 2^64 - 1
};

// Before --device existed, --backend named the device kind (sim|cpu). `--backend cpu` still means
// --device cpu, and `--backend sim` where no process group exists (single, dp) names the device;
// each returns the one-line note the command prints about the new spelling ("" when none applies).
std::string adopt_old_backend_spelling(FlagsGiven& flags) {
  if (flags.backend->count() == 0) return "";
  if (flags.backend_text == "cpu") {
    DPS_CHECK(flags.device->count() == 0, ErrorKind::kUsage,
              "--backend cpu is the old spelling of --device cpu; give only --device {}", flags.device_text);
    flags.device_text = "cpu";
    flags.backend_text = "sim";
    return "note: --backend cpu is now spelled --device cpu (--backend names the process-group backend)";
  }
  return "";
}

std::string old_sim_backend_note(const FlagsGiven& flags, TrainMode mode) {
  if (flags.backend->count() == 0 || flags.backend_text != "sim" || runs_ranks(mode) ||
      flags.device->count() != 0)
    return "";
  return fmt::format("note: --mode {} has no process group; to name the device, spell it --device sim",
                     flags.mode_text);
}

// The one place the words of --mode, --device and --backend become the config's enums.
void parse_flag_words(TrainConfig& config, const FlagsGiven& flags) {
  config.mode = parse_train_mode(flags.mode_text);
  config.device = parse_device_kind(flags.device_text);
  config.backend = parse_pg_backend(flags.backend_text);
}

void resolve_flags(TrainConfig& config, const FlagsGiven& flags) {
  DPS_CHECK(flags.steps->count() == 0 || config.steps >= 1, ErrorKind::kUsage,
            "--steps must be at least 1, got {}", config.steps);
  DPS_CHECK(flags.epochs->count() == 0 || config.epochs >= 1, ErrorKind::kUsage,
            "--epochs must be at least 1, got {}", config.epochs);
  DPS_CHECK(flags.timeout->count() == 0 || config.timeout_s != 0.0, ErrorKind::kUsage,
            "--timeout must be a number of seconds from 0.001 to 86400, got 0");
  const std::string& text = flags.seed_text;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), config.seed);
  DPS_CHECK(error == std::errc() && end == text.data() + text.size() && !text.empty(), ErrorKind::kUsage,
            "--seed must be an integer from 0 to {}, got '{}'", std::numeric_limits<uint64_t>::max(), text);
}

}  // namespace

void register_train(CLI::App& app, Registration registration) {
  auto config_ptr = std::make_shared<TrainConfig>();
  auto flags_ptr = std::make_shared<FlagsGiven>();
  CLI::App* cmd = app.add_subcommand("train", "train an MLP on simulated GPUs (or the cpu) and trace it");
  TrainConfig& config = *config_ptr;
  FlagsGiven& flags = *flags_ptr;
  cmd->add_option("--mode", flags.mode_text, "single | dp | ddp")->capture_default_str();
  flags.device = cmd->add_option("--device", flags.device_text,
                                 "sim (simulated GPUs) | cpu | cuda (real GPUs, docs/gpu.md)")
                     ->capture_default_str();
  flags.backend =
      cmd->add_option("--backend", flags.backend_text,
                      "ddp process-group backend: sim | cuda | nccl (one process per GPU under dpscope "
                      "launch) | mpi (under mpirun)")
          ->capture_default_str();
  cmd->add_option("--devices", config.devices, "number of GPUs (simulated, or logical cuda GPUs)")
      ->capture_default_str();
  cmd->add_option("--gpu-mem", config.gpu_mem_mb,
                  "--device cuda: memory cap of each logical GPU in MiB (default: an even split)");
  cmd->add_option("--preset", config.preset, "hardware preset (dpscope presets)")->capture_default_str();
  cmd->add_option("--model", config.model, "MLP layer sizes, e.g. 784-512-10")->capture_default_str();
  cmd->add_option("--loss", config.loss, "ce | mse")->capture_default_str();
  cmd->add_option("--optim", config.optim, "sgd | adam | adamw")->capture_default_str();
  cmd->add_option("--lr", config.lr, "learning rate")->capture_default_str();
  cmd->add_option("--momentum", config.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", config.weight_decay, "weight decay")->capture_default_str();
  cmd->add_option("--batch", config.batch, "mini-batch size (single/dp: whole batch; ddp: per rank)")
      ->capture_default_str();
  cmd->add_option("--data", config.data,
                  "x.npy,y.npy (float32 inputs; int64 classes for ce, float32 for mse)");
  cmd->add_option("--dataset", config.dataset, "synthetic data NAME:N (spirals, blobs, regression)");
  cmd->add_flag("--shuffle,!--no-shuffle", config.shuffle, "shuffle samples every epoch (default on)");
  cmd->add_option("--seed", flags.seed_text, "seed for initialisation, data and shuffling")
      ->capture_default_str();
  flags.steps = cmd->add_option("--steps", config.steps, "number of optimizer steps");
  flags.epochs =
      cmd->add_option("--epochs", config.epochs, "number of epochs (default 1 when --steps is not given)");
  cmd->add_option("--init", config.init, "initial weights (safetensors, PyTorch state_dict names)");
  cmd->add_option("--save", config.save, "write final weights (safetensors)");
  cmd->add_option("--trace", config.trace,
                  "write a trace (JSON Lines, docs/trace-format.md; a name ending in .zst: zstd-compressed); "
                  "ranks that are processes "
                  "(mpi, nccl under dpscope launch) write DIR/rank-K.jsonl");
  cmd->add_flag(
      "--trace-zstd", config.trace_zstd,
      "compress the trace with zstd: ranks that are processes write DIR/rank-K.jsonl.zst (one trace "
      "file: name it *.zst)");
  cmd->add_option("--trace-kernels-every", config.trace_kernels_every,
                  "trace kernels and copies on one step in K only; the other steps get one span per phase "
                  "(what keeps a GPU trace cheap: docs/gpu.md)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-dir", config.checkpoint_dir,
                  "write checkpoints there (atomic, newest 2 kept)");
  cmd->add_option("--checkpoint-every", config.checkpoint_every,
                  "steps between checkpoints (default: once per epoch)");
  cmd->add_flag("--resume", config.resume, "continue from the newest checkpoint in --checkpoint-dir");
  cmd->add_option("--bucket-mb", config.bucket_cap_mb, "ddp: bucket_cap_mb (MiB)")->capture_default_str();
  cmd->add_option("--first-bucket-mb", config.first_bucket_mb, "ddp: first bucket limit (MiB)")
      ->capture_default_str();
  cmd->add_option("--no-sync-every", config.no_sync_every,
                  "ddp: synchronize every K-th backward (K-1 under no_sync)")
      ->capture_default_str();
  cmd->add_flag("--find-unused-parameters", config.find_unused_parameters,
                "ddp: find_unused_parameters=True");
  cmd->add_flag("--zero", config.zero, "ddp: shard optimizer state with ZeroRedundancyOptimizer");
  cmd->add_option("--comm-hook", config.comm_hook, "ddp: allreduce | fp16 (compression)")
      ->capture_default_str();
  cmd->add_option("--algo", config.algo, "ddp: all-reduce algorithm auto | ring | tree | naive")
      ->capture_default_str();
  flags.timeout =
      cmd->add_option("--timeout", config.timeout_s,
                      "seconds a collective and the ranks' rendezvous may wait for the other ranks before "
                      "failing (init_process_group(timeout=...); default 1800, the store's 300)");
  cmd->add_flag("--timing-only", config.timing_only,
                "ddp on shapes without data, up to 65,536 simulated GPUs in nodes (docs/scaling.md)");
  cmd->add_option(
      "--pitfall", config.pitfalls,
      "switch on a lesson pitfall: no-set-epoch, no-average, unused-parameter, mismatched-collective, "
      "input-on-cpu");
  if (registration == Registration::kParseOnly) {
    cmd->callback([config_ptr, flags_ptr] {});  // keeps what the options write into alive
    return;
  }
  cmd->callback([config_ptr, flags_ptr] {
    TrainConfig& run_config = *config_ptr;
    std::string note = adopt_old_backend_spelling(*flags_ptr);
    resolve_flags(run_config, *flags_ptr);
    parse_flag_words(run_config, *flags_ptr);
    if (note.empty()) note = old_sim_backend_note(*flags_ptr, run_config.mode);
    run_config.validate();
    check_machine(run_config);
    check_output_paths(run_config);
    if (run_config.one_process_per_rank()) {
      // One rank of a job: when its launcher stops it because another rank failed, it says so.
      if (const auto mpi = mpi::launch_from_environment(); mpi && mpi->size > 1) {
        say_why_when_terminated(mpi->rank);
      } else if (const auto env = read_env_rendezvous(); env && env->world_size > 1) {
        say_why_when_terminated(env->rank);
      }
    }
    if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());  // only once the flags are known good
    const bool tty = isatty(fileno(stderr)) && isatty(fileno(stdout));
    StdoutLines lines;
    Progress progress(tty, run_config.timing_only, lines);
    TrainResult result;
    try {
      result = run_training(run_config, [&](const StepReport& report) {
        check_scenario_deadline();  // (a lesson's scenario only)
        progress.update(report);
      });
    } catch (...) {
      keep_quiet_when_terminated();  // its own error is the line this process prints
      throw;
    }
    if (result.process_rank == 0)
      print_summary(run_config, result, lines);  // processes: rank 0 speaks for the run
    lines.finish();
  });
}

}  // namespace dpscope::cli
