// `dpscope train`: flags → TrainConfig → run_training(), with a progress bar and a summary.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "commands.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope::cli {
namespace {

// One line that redraws itself on a terminal; plain lines (about ten per run) otherwise.
class Progress {
 public:
  explicit Progress(bool tty) : tty_(tty) {}

  void update(const StepReport& r) {
    const int64_t done = r.step + 1;
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(r.total_steps, 1));
      std::fprintf(stderr, "\r[%s%s] step %lld/%lld  epoch %lld  loss %.4f ",
                   std::string(filled, '#').c_str(), std::string(kWidth - filled, ' ').c_str(),
                   static_cast<long long>(done), static_cast<long long>(r.total_steps),
                   static_cast<long long>(r.epoch), r.loss);
      if (done == r.total_steps) std::fputc('\n', stderr);
      std::fflush(stderr);
    } else {
      const int64_t every = std::max<int64_t>(1, r.total_steps / 10);
      if (done % every == 0 || done == r.total_steps || r.step == 0)
        fmt::print("step {}/{}  epoch {}  loss {:.6f}\n", done, r.total_steps, r.epoch, r.loss);
    }
  }

 private:
  bool tty_;
};

void print_summary(const TrainConfig& c, const TrainResult& r) {
  fmt::print("\n== dpscope train: {} on {} ==\n", c.mode, r.device_name);
  fmt::print("model {} ({} parameters), loss {}, optimizer {} (lr {})\n", c.model, r.parameter_count, c.loss,
             c.optim, c.lr);
  if (c.mode == "ddp") {
    fmt::print("batch {} per rank x {} ranks = {} samples per step (global batch), {} samples, {} steps\n",
               c.batch, c.devices, c.batch * c.devices, r.samples, r.steps);
  } else if (c.mode == "dp") {
    const int64_t chunk = (c.batch + c.devices - 1) / c.devices;
    fmt::print(
        "batch {} (the whole mini-batch, scattered in chunks of up to {} over {} GPUs), {} samples, {} "
        "steps\n",
        c.batch, chunk, c.devices, r.samples, r.steps);
  } else {
    fmt::print("batch {} (the whole mini-batch), {} samples, {} steps\n", c.batch, r.samples, r.steps);
  }
  if (!r.losses.empty()) fmt::print("loss: first {:.6f}, final {:.6f}\n", r.losses.front(), r.losses.back());
  const double steps_per_s = r.wall_seconds > 0 ? r.steps / r.wall_seconds : 0.0;
  fmt::print("wall time {:.3f} s ({:.1f} steps/s on this machine)\n", r.wall_seconds, steps_per_s);
  if (r.sim_total_ns > 0 && r.steps > 0)
    fmt::print("simulated time {:.3f} ms ({:.1f} us per step on {})\n", r.sim_total_ns / 1e6,
               r.sim_total_ns / 1e3 / static_cast<double>(r.steps), c.preset);
  if (r.resumed_from_step >= 0)
    fmt::print("resumed after step {} from {}\n", r.resumed_from_step, c.checkpoint_dir);
  if (!r.last_checkpoint.empty()) fmt::print("checkpoint: {}\n", r.last_checkpoint);
  if (!c.save.empty()) fmt::print("weights saved to {}\n", c.save);
  if (!r.trace_path.empty()) {
    fmt::print("trace: {} ({} events)\n", r.trace_path, r.trace_events);
    fmt::print("  export for Perfetto:  dpscope trace export --chrome {} {}.perfetto.json\n", r.trace_path,
               std::filesystem::path(r.trace_path).replace_extension().string());
    fmt::print("  per-device stats:     dpscope trace stats {}\n", r.trace_path);
  }
}

}  // namespace

void register_train(CLI::App& app) {
  auto config = std::make_shared<TrainConfig>();
  CLI::App* cmd = app.add_subcommand("train", "train an MLP on simulated GPUs (or the cpu) and trace it");
  TrainConfig& c = *config;
  cmd->add_option("--mode", c.mode, "single | dp | ddp")->capture_default_str();
  cmd->add_option("--backend", c.backend, "sim (simulated GPUs) | cpu")->capture_default_str();
  cmd->add_option("--devices", c.devices, "number of simulated GPUs")->capture_default_str();
  cmd->add_option("--preset", c.preset, "hardware preset (dpscope presets)")->capture_default_str();
  cmd->add_option("--model", c.model, "MLP layer sizes, e.g. 784-512-10")->capture_default_str();
  cmd->add_option("--loss", c.loss, "ce | mse")->capture_default_str();
  cmd->add_option("--optim", c.optim, "sgd | adam | adamw")->capture_default_str();
  cmd->add_option("--lr", c.lr, "learning rate")->capture_default_str();
  cmd->add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", c.weight_decay, "weight decay")->capture_default_str();
  cmd->add_option("--batch", c.batch, "mini-batch size (single/dp: whole batch; ddp: per rank)")
      ->capture_default_str();
  cmd->add_option("--data", c.data, "x.npy,y.npy (float32 inputs; int64 classes for ce, float32 for mse)");
  cmd->add_option("--dataset", c.dataset, "synthetic data NAME:N (spirals, blobs, regression)");
  cmd->add_flag("--shuffle,!--no-shuffle", c.shuffle, "shuffle samples every epoch (default on)");
  cmd->add_option("--seed", c.seed, "seed for initialisation, data and shuffling")->capture_default_str();
  cmd->add_option("--steps", c.steps, "number of optimizer steps");
  cmd->add_option("--epochs", c.epochs, "number of epochs (default 1 when --steps is not given)");
  cmd->add_option("--init", c.init, "initial weights (safetensors, PyTorch state_dict names)");
  cmd->add_option("--save", c.save, "write final weights (safetensors)");
  cmd->add_option("--trace", c.trace, "write a trace (JSON Lines, docs/trace-format.md)");
  cmd->add_option("--checkpoint-dir", c.checkpoint_dir, "write checkpoints there (atomic, newest 2 kept)");
  cmd->add_option("--checkpoint-every", c.checkpoint_every,
                  "steps between checkpoints (default: once per epoch)");
  cmd->add_flag("--resume", c.resume, "continue from the newest checkpoint in --checkpoint-dir");
  cmd->add_option("--bucket-mb", c.bucket_mb, "ddp: bucket_cap_mb (MiB)")->capture_default_str();
  cmd->add_option("--first-bucket-mb", c.first_bucket_mb, "ddp: first bucket limit (MiB)")
      ->capture_default_str();
  cmd->add_option("--no-sync-every", c.no_sync_every,
                  "ddp: synchronize every K-th backward (K-1 under no_sync)")
      ->capture_default_str();
  cmd->add_flag("--find-unused-parameters", c.find_unused_parameters, "ddp: find_unused_parameters=True");
  cmd->add_flag("--zero", c.zero, "ddp: shard optimizer state with ZeroRedundancyOptimizer");
  cmd->add_option("--comm-hook", c.comm_hook, "ddp: allreduce | fp16 (compression)")->capture_default_str();
  cmd->add_option("--algo", c.algo, "ddp: all-reduce algorithm auto | ring | tree | naive")
      ->capture_default_str();
  cmd->add_option("--pitfall", c.pitfalls,
                  "switch on a lesson pitfall: no-set-epoch, no-average, unused-parameter");
  cmd->callback([config] {
    const bool tty = isatty(fileno(stderr)) && isatty(fileno(stdout));
    Progress progress(tty);
    const TrainResult result = run_training(*config, [&](const StepReport& r) { progress.update(r); });
    print_summary(*config, result);
  });
}

}  // namespace dpscope::cli
