// dpscope-viz-tracegen: writes synthetic DP/DDP/single traces of a chosen size with the real
// TraceRecorder, for the visualizer's benchmarks (docs/benchmarks.md) and for trying the viewer
// without a training run.
//   dpscope-viz-tracegen --mode ddp --devices 4 --steps 3 --out ddp.jsonl
//   dpscope-viz-tracegen --mode ddp --devices 8 --layers 12 --events 1000000 --out 1m.jsonl
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "dpscope/base/error.hpp"
#include "tools/synthetic_trace.hpp"

using dpscope::viz::tools::SyntheticMode;
using dpscope::viz::tools::SyntheticTraceOptions;

int main(int argc, char** argv) {
  CLI::App app{"dpscope-viz-tracegen: write a synthetic training trace (DP, DDP or single device)"};
  SyntheticTraceOptions o;
  std::string mode = "ddp";
  std::string out;
  int hidden_layers = 2;
  int64_t hidden = 256;
  uint64_t target_events = 0;
  app.add_option("--mode", mode, "single | dp | ddp")->check(CLI::IsMember({"single", "dp", "ddp"}));
  app.add_option("--devices", o.devices, "GPUs (ranks or replicas)")->check(CLI::Range(1, 64));
  app.add_option("--steps", o.steps, "training steps")->check(CLI::Range(1, 10000000));
  app.add_option("--layers", hidden_layers, "hidden Linear layers of the MLP")->check(CLI::Range(0, 512));
  app.add_option("--hidden", hidden, "width of the hidden layers")->check(CLI::Range(1, 1 << 16));
  app.add_option("--batch", o.batch, "mini-batch (DDP: per rank)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--events", target_events, "choose --steps so the trace has about this many events");
  app.add_option("--out", out, "the trace to write (.jsonl)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.mode = mode == "single" ? SyntheticMode::kSingle
                            : (mode == "dp" ? SyntheticMode::kDataParallel : SyntheticMode::kDistributed);
  if (o.mode == SyntheticMode::kSingle) o.devices = 1;
  o.widths = {784};
  for (int i = 0; i < hidden_layers; ++i) o.widths.push_back(hidden);
  o.widths.push_back(10);
  try {
    const auto start = std::chrono::steady_clock::now();
    if (target_events > 0) {
      // Measure the events of one step (past the first, whose buckets differ) on the output path, then scale.
      SyntheticTraceOptions probe = o;
      probe.steps = 2;
      const uint64_t two = dpscope::viz::tools::write_synthetic_trace(out, probe).events;
      probe.steps = 3;
      const uint64_t three = dpscope::viz::tools::write_synthetic_trace(out, probe).events;
      const uint64_t per_step = std::max<uint64_t>(three - two, 1);
      const uint64_t fixed = three > 3 * per_step ? three - 3 * per_step : 0;
      const uint64_t wanted = target_events > fixed ? target_events - fixed : 0;
      o.steps = static_cast<int>(std::max<uint64_t>(1, (wanted + per_step / 2) / per_step));
    }
    const auto info = dpscope::viz::tools::write_synthetic_trace(out, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("wrote {}: {} events, {} steps, {} device(s), {:.2f} s\n", out, info.events, o.steps,
               o.devices, s);
    return 0;
  } catch (const dpscope::Error& e) {
    fmt::print(stderr, "dpscope-viz-tracegen: error: {}\n", e.what());
    return e.is_usage_error() ? 2 : 1;
  }
}
