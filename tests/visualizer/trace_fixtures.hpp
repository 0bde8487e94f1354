// Traces for the visualizer tests, all written by the runtime on simulated GPUs: `dpscope train`
// runs (run_training with --trace: single, DataParallel, DDP), a `dpscope bench` run, and a small
// hand-timed trace written event by event through the TraceRecorder whose state at every time can
// be written down exactly. Also: a scratch directory per test and helpers to find events in a model.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/train/train.hpp"
#include "replay/replay_model.hpp"

namespace dpscope::viz::testing {

// A trace read from a file and its replay model (both on the heap: the model references the data,
// and a LoadedTrace can be moved).
struct LoadedTrace {
  std::unique_ptr<trace::TraceData> data;
  std::unique_ptr<ReplayModel> model;
};
LoadedTrace load_trace(const std::filesystem::path& path);

// A fresh directory under the build tree for the running test.
std::filesystem::path scratch_dir();
void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_text(const std::filesystem::path& path);

// What a fixture run wrote: its configuration, its result and the header ids of its GPUs.
struct RuntimeTrace {
  TrainConfig config;
  TrainResult result;
  std::vector<int> gpu_ids;  // header ids of the GPUs, by rank / replica ("sim:0", "sim:1", ...)
  int host_id = -1;
};

// The model of every fixture run: Linear layers 784-256-128-10 with ReLU between, so parameters
// 0..5 are 0.weight [256,784], 0.bias, 2.weight [128,256], 2.bias, 4.weight [10,128], 4.bias.
inline constexpr const char* kFixtureModel = "784-256-128-10";

// `dpscope train --mode ddp --devices D --batch B --steps S --no-shuffle --algo ring
// --bucket-mb 0.25 --first-bucket-mb 0.0625` on blobs:(D*B*S):784:10 (exactly one epoch), traced.
// Step 0 runs on the initial single bucket {0..5}; the rebuild after it makes {5,4,3,2} and {1,0}.
RuntimeTrace write_ddp_trace(const std::filesystem::path& path, int devices = 4, int steps = 2,
                             int64_t batch = 4);
// `dpscope train --mode dp`: each step's `batch` rows chunked over `devices` replicas (torch.chunk),
// blobs:(B*S):784:10, no shuffle, traced.
RuntimeTrace write_dp_trace(const std::filesystem::path& path, int devices = 4, int steps = 2,
                            int64_t batch = 10);
// `dpscope train --mode single` on one simulated GPU, batch 16, traced.
RuntimeTrace write_single_trace(const std::filesystem::path& path, int steps = 2);
// A DDP run that fails (--pitfall mismatched-collective, 3 steps): every rank ends with an `error`
// event. `model` is --model; its first and last sizes shape the blobs data set. The run's error
// is expected and swallowed.
void write_failed_ddp_trace(const std::filesystem::path& path, int devices, const std::string& model,
                            int64_t batch);

// A 4x T4 trace written by the runtime itself (run_collective_bench, as `dpscope bench --preset t4
// --trace`): one 1 MiB ring all-reduce per iteration, timing only. The header holds the PCIe host
// tree: "pcie switch 0" and "pcie switch 1" (kind "switch") between the GPUs and the host.
void write_t4_bench_trace(const std::filesystem::path& path, int iterations = 2);

// Two simulated H100s (header ids 0 and 2; the host is 1), every event at a hand-picked time:
//   GPU 0 compute: phase "forward" [1000, 3000) holding "forward 0.Linear" [1000, 2000) and
//                  "forward 2.Linear" [2000, 3000)
//   GPU 0 comm:    "all-reduce" (collective) [3000, 5000) holding ring transfers 0 -> 2 of 1000 B,
//                  algo_step 0 at [3000, 4000) and algo_step 1 at [4000, 5000)
//   GPU 2 comm:    ring transfers 2 -> 0 of 1000 B at the same times
//   GPU 0 memory:  parameters 100 at t=500; parameters 100 + activations 50 at t=2500
//   GPU 0 / GPU 2: samples [0, 1] and [2, 3] at t=0; instants "grad_ready" at t=2000 on both
//   loss 2.5 at t=4500 (step 0) from rank 0
// A run of `ranks` CPU processes as `mpirun ... --backend mpi --trace DIR` writes it: DIR/rank-K.jsonl,
// each rank on its own clock (rank K's runs K * 300 - 100 ns behind rank 0's; rank 0's is exact)
// with its "process" entry. Each step (10 us on rank 0's clock): samples, memory, forward and
// backward spans, grad_ready, an all-reduce span with one ring transfer to the next rank's cpu
// (`dst_rank`), an optimizer span, the rank's loss. On rank 0's clock every rank's events happen at
// the same times.
void write_rank_directory(const std::filesystem::path& dir, int ranks, int steps);

// A two-process DDP run as dpscope_torch records it (DIR/rank-{0,1}.jsonl, one clock, clock
// uncertainty 40 ns) whose rank `late_rank` is a straggler: its layer-0 gradients come `delay_ns`
// late in every step. Parameters 0.weight [64,16] 4096 B, 0.bias 256 B, 2.weight [4,64] 1024 B,
// 2.bias 16 B; buckets (header) 0 = [3, 2] 1040 B and 1 = [1, 0] 4352 B, limits
// first_bucket_mb 1 KiB and bucket_cap_mb 0.01 MiB. Step k starts at k * kStragglerStepNs on
// both ranks: samples, forward [10, 210) us, grad_ready 3 at 300 us and 2 at 400 us, bucket 0's
// all-reduce [410, 510) us, grad_ready 1 at 600 us and 0 at 700 us (+ delay on the late rank),
// bucket 1's all-reduce from its launch 10 us later until 110 us after the later rank's, the
// optimizer step and the loss.
inline constexpr int64_t kStragglerStepNs = 2'000'000;
void write_straggler_directory(const std::filesystem::path& dir, int steps, int late_rank, int64_t delay_ns);

struct HandTrace {
  int gpu0 = 0;
  int gpu1 = 2;
  int host = 1;
};
HandTrace write_hand_trace(const std::filesystem::path& path);

// The time-order position of the first event matching `pred`; fails the test when none does.
uint32_t find_position(const ReplayModel& model, const std::function<bool(const trace::Event&)>& pred);
// The same for an instant `name` on `rank` in `step` whose numeric arg `key` equals `value`.
uint32_t find_instant(const ReplayModel& model, int rank, int64_t step, EventName name,
                      std::string_view key = {}, double value = 0);

}  // namespace dpscope::viz::testing
