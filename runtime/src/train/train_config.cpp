// TrainConfig validation (values only; train/world.cpp checks the machine, train/output_paths.cpp
// the files), its JSON form (the trace header's "run" object and a checkpoint's configuration), and
// the resume check.
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/train/train.hpp"
#include "mode.hpp"

namespace dpscope {
namespace {

constexpr int kMaxTimingOnlyGpus = 65536;
// --timeout's range: a millisecond (the unit of every wait) to a day.
constexpr double kMinTimeoutS = 0.001;
constexpr double kMaxTimeoutS = 86400.0;

template <typename T>
bool one_of(const T& value, std::initializer_list<T> allowed) {
  for (const T& a : allowed)
    if (value == a) return true;
  return false;
}

// The largest MiB value a size flag takes (1 PiB): its bytes then fit in 64 bits with room to spare.
constexpr double kMaxMib = 1024.0 * 1024.0 * 1024.0;

// Refuses a float flag that is not a finite number in [min, max] (above `min` when `above_min`):
// `--lr 1e309` parses as inf and `--lr nan` as NaN, and either used to run on into a loss of nan.
// `unit` follows the bound in the message (" MiB").
void check_float_flag(const char* flag, double value, double min, double max, bool above_min = false,
                      const char* unit = "") {
  DPS_CHECK(std::isfinite(value), ErrorKind::kUsage, "{} must be a finite number, got {}", flag, value);
  DPS_CHECK(above_min ? value > min : value >= min, ErrorKind::kUsage, "{} must be {} {}{}, got {}", flag,
            above_min ? ">" : ">=", min, unit, value);
  DPS_CHECK(value <= max, ErrorKind::kUsage, "{} must be <= {}{}, got {}", flag, max, unit, value);
}

// A flag's words and the values they stand for, in the order its usage error lists them.
template <typename E>
struct Word {
  E value;
  std::string_view word;
};
constexpr Word<DeviceKind> kDeviceWords[] = {
    {DeviceKind::kCpu, "cpu"}, {DeviceKind::kSim, "sim"}, {DeviceKind::kCuda, "cuda"}};
constexpr Word<PgBackend> kBackendWords[] = {{PgBackend::kSim, "sim"},
                                             {PgBackend::kCuda, "cuda"},
                                             {PgBackend::kNccl, "nccl"},
                                             {PgBackend::kMpi, "mpi"}};
// --mode's words are the modes' own (mode.hpp).
std::vector<Word<TrainMode>> mode_words() {
  std::vector<Word<TrainMode>> words;
  for (const detail::TrainModeSpec* spec : detail::kTrainModes) words.push_back({spec->mode, spec->word});
  return words;
}

// Throws Error(kUsage) "--mode 'x' is not one of single, dp, ddp" for a word not in `words`.
template <typename Words>
auto parse_word(const Words& words, const std::string& text, std::string_view flag) {
  std::vector<std::string_view> all;
  for (const auto& w : words) {
    if (w.word == text) return w.value;
    all.push_back(w.word);
  }
  throw Error(ErrorKind::kUsage, fmt::format("{} '{}' is not one of {}", flag, text, fmt::join(all, ", ")));
}

template <typename Words, typename E>
std::string word_of(const Words& words, E value, std::string_view type) {
  for (const auto& w : words)
    if (w.value == value) return std::string(w.word);
  throw Error(ErrorKind::kInternal,
              fmt::format("{} {} has no name: add it to name({})", type, static_cast<int>(value), type));
}

}  // namespace

TrainMode parse_train_mode(const std::string& text) { return parse_word(mode_words(), text, "--mode"); }
DeviceKind parse_device_kind(const std::string& text) { return parse_word(kDeviceWords, text, "--device"); }
PgBackend parse_pg_backend(const std::string& text) { return parse_word(kBackendWords, text, "--backend"); }

std::string name(TrainMode mode) { return std::string(detail::mode_spec(mode).word); }
std::string name(DeviceKind device) { return word_of(kDeviceWords, device, "DeviceKind"); }
std::string name(PgBackend backend) { return word_of(kBackendWords, backend, "PgBackend"); }

namespace detail {

const TrainModeSpec& mode_spec(TrainMode mode) {
  const auto index = static_cast<size_t>(mode);
  DPS_ASSERT(
      index < std::size(kTrainModes) && kTrainModes[index]->mode == mode,
      "TrainMode {} has no spec at its index of kTrainModes: add the mode's spec there (train/mode.hpp)",
      index);
  return *kTrainModes[index];
}

void check_mpi_backend(const TrainConfig& config, bool ranks_on_cpu) {
  // MPI's ranks are processes on the CPU (mpirun -np N dpscope train ... --backend mpi).
  DPS_CHECK(config.backend != PgBackend::kMpi || ranks_on_cpu, ErrorKind::kUsage,
            "--backend mpi runs each rank as a process on its CPU, started by mpirun -np N: use --mode ddp "
            "--device cpu");
}

void check_scale(const TrainConfig& config, bool timing_only_allowed) {
  if (!config.timing_only) {
    DPS_CHECK(config.devices <= 64, ErrorKind::kUsage,
              "--devices {} is more than the 64 GPUs supported (add --timing-only to simulate more)",
              config.devices);
    return;
  }
  DPS_CHECK(timing_only_allowed && config.device == DeviceKind::kSim, ErrorKind::kUsage,
            "--timing-only simulates DistributedDataParallel at scale: it needs --mode ddp --device sim, got "
            "--mode {} --device {}",
            name(config.mode), name(config.device));
  DPS_CHECK(config.devices <= kMaxTimingOnlyGpus, ErrorKind::kUsage,
            "--devices {} is more than the {} GPUs --timing-only simulates", config.devices,
            kMaxTimingOnlyGpus);
  DPS_CHECK(config.data.empty() && config.dataset.empty() && config.init.empty() && config.save.empty() &&
                config.checkpoint_dir.empty() && !config.resume,
            ErrorKind::kUsage,
            "--timing-only runs on shapes without data: it takes no --data, --dataset, --init, --save, "
            "--checkpoint-dir or --resume");
  DPS_CHECK(config.pitfalls.empty() || (config.pitfalls.size() == 1 && config.pitfalls[0] == "no-average"),
            ErrorKind::kUsage, "--timing-only has no data for --pitfall {} to show (only no-average applies)",
            fmt::join(config.pitfalls, ","));
}

}  // namespace detail

void TrainConfig::validate() const {
  using std::string;
  // mode, device and backend are parsed words already (parse_train_mode() and its siblings). The
  // registry also holds backends --backend does not offer (analytic, run by --timing-only).
  std::vector<std::string> built;
  for (const Word<PgBackend>& w : kBackendWords)
    if (is_backend_registered(std::string(w.word))) built.emplace_back(w.word);
  std::sort(built.begin(), built.end());
  DPS_CHECK(is_backend_registered(name(backend)), ErrorKind::kUsage,
            "--backend {} is not built in this version (built: {})", name(backend), fmt::join(built, ", "));
  DPS_CHECK(devices >= 1, ErrorKind::kUsage, "--devices must be at least 1, got {}", devices);
  const detail::TrainModeSpec& spec = detail::mode_spec(mode);
  spec.check_flags(*this);
  check_float_flag("--gpu-mem", gpu_mem_mb, 0.0, kMaxMib, false, " MiB");
  DPS_CHECK(gpu_mem_mb == 0.0 || device == DeviceKind::kCuda, ErrorKind::kUsage,
            "--gpu-mem caps the memory of cuda devices: it needs --device cuda");
  DPS_CHECK(one_of<string>(loss, {"ce", "mse"}), ErrorKind::kUsage, "--loss '{}' is not one of ce, mse",
            loss);
  DPS_CHECK(one_of<string>(optim, {"sgd", "adam", "adamw"}), ErrorKind::kUsage,
            "--optim '{}' is not one of sgd, adam, adamw", optim);
  constexpr double kNoMax = std::numeric_limits<double>::max();
  check_float_flag("--lr", lr, 0.0, kNoMax);
  check_float_flag("--momentum", momentum, 0.0, 1.0);  // above 1 the velocity grows without bound
  check_float_flag("--weight-decay", weight_decay, 0.0, kNoMax);
  DPS_CHECK(optim == "sgd" || momentum == 0.0, ErrorKind::kUsage, "--momentum applies to --optim sgd only");
  DPS_CHECK(batch >= 1, ErrorKind::kUsage, "--batch must be at least 1, got {}", batch);
  DPS_CHECK(timing_only || !(data.empty() && dataset.empty()), ErrorKind::kUsage,
            "no data: give --data x.npy,y.npy or --dataset NAME:N");
  DPS_CHECK(data.empty() || dataset.empty(), ErrorKind::kUsage, "give either --data or --dataset, not both");
  if (!data.empty()) {
    const size_t comma = data.find(',');
    DPS_CHECK(comma != std::string::npos && comma > 0 && comma + 1 < data.size() &&
                  data.find(',', comma + 1) == std::string::npos,
              ErrorKind::kUsage, "--data '{}' must be two files: inputs.npy,targets.npy", data);
  }
  DPS_CHECK(steps == -1 || epochs == -1, ErrorKind::kUsage, "give either --steps or --epochs, not both");
  DPS_CHECK(steps == -1 || steps >= 1, ErrorKind::kUsage, "--steps must be at least 1, got {}", steps);
  DPS_CHECK(epochs == -1 || epochs >= 1, ErrorKind::kUsage, "--epochs must be at least 1, got {}", epochs);
  DPS_CHECK(checkpoint_every >= 0, ErrorKind::kUsage, "--checkpoint-every must be >= 0, got {}",
            checkpoint_every);
  DPS_CHECK(checkpoint_every == 0 || !checkpoint_dir.empty(), ErrorKind::kUsage,
            "--checkpoint-every needs --checkpoint-dir");
  DPS_CHECK(!resume || !checkpoint_dir.empty(), ErrorKind::kUsage, "--resume needs --checkpoint-dir");
  DPS_CHECK(trace_kernels_every >= 1, ErrorKind::kUsage, "--trace-kernels-every must be at least 1, got {}",
            trace_kernels_every);
  DPS_CHECK(trace_kernels_every == 1 || !trace.empty(), ErrorKind::kUsage,
            "--trace-kernels-every needs --trace");

  for (const std::string& p : pitfalls) {
    DPS_CHECK(
        one_of<string>(
            p, {"no-set-epoch", "no-average", "unused-parameter", "mismatched-collective", "input-on-cpu"}),
        ErrorKind::kUsage,
        "--pitfall '{}' is not one of no-set-epoch, no-average, unused-parameter, mismatched-collective, "
        "input-on-cpu",
        p);
    // The mode's own pitfalls; forgetting `x.to(device)` shows only where there is a device to forget.
    if (spec.takes_pitfall(p) && (p != "input-on-cpu" || device != DeviceKind::kCpu)) continue;
    DPS_CHECK(p != "input-on-cpu", ErrorKind::kUsage,
              "--pitfall input-on-cpu applies to --mode single on a GPU (--device sim or cuda)");
    throw Error(ErrorKind::kUsage, fmt::format("--pitfall {} applies to --mode ddp only", p));
  }
  const bool ddp_defaults = bucket_cap_mb == kDefaultBucketCapMb &&
                            first_bucket_mb == kDefaultFirstBucketMb && no_sync_every == 1 &&
                            !find_unused_parameters && !zero && comm_hook == "allreduce" && algo == "auto";
  DPS_CHECK(
      spec.ranks || ddp_defaults, ErrorKind::kUsage,
      "--bucket-mb, --first-bucket-mb, --no-sync-every, --find-unused-parameters, --zero, --comm-hook and "
      "--algo apply to --mode ddp only");
  check_float_flag("--bucket-mb", bucket_cap_mb, 0.0, kMaxMib, /*above_min=*/true);
  check_float_flag("--first-bucket-mb", first_bucket_mb, 0.0, kMaxMib, /*above_min=*/true);
  DPS_CHECK(no_sync_every >= 1, ErrorKind::kUsage, "--no-sync-every must be at least 1, got {}",
            no_sync_every);
  DPS_CHECK(one_of<string>(comm_hook, {"allreduce", "fp16"}), ErrorKind::kUsage,
            "--comm-hook '{}' is not one of allreduce, fp16", comm_hook);
  DPS_CHECK(one_of<string>(algo, {"auto", "ring", "tree", "naive"}), ErrorKind::kUsage,
            "--algo '{}' is not one of auto, ring, tree, naive", algo);
  DPS_CHECK(timeout_s == 0.0 ||
                (std::isfinite(timeout_s) && timeout_s >= kMinTimeoutS && timeout_s <= kMaxTimeoutS),
            ErrorKind::kUsage, "--timeout must be a number of seconds from {} to {}, got {}", kMinTimeoutS,
            kMaxTimeoutS, timeout_s);
}

std::chrono::milliseconds TrainConfig::timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(timeout_s * 1000.0)));
}

bool TrainConfig::has_pitfall(const std::string& name) const {
  return std::find(pitfalls.begin(), pitfalls.end(), name) != pitfalls.end();
}

void check_resumable(const std::string& checkpoint_config, const TrainConfig& current,
                     const std::string& file) {
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(checkpoint_config);
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorKind::kFormat,
                fmt::format("checkpoint {}: its run configuration is not valid JSON", file));
  }
  const nlohmann::json now = nlohmann::json::parse(current.to_json());
  // What may differ between the interrupted run and its continuation: how long it runs and where
  // its outputs go. Everything that changes the numbers must match.
  static const std::set<std::string> kFree = {"steps", "epochs", "init", "trace_kernels_every"};
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (kFree.count(it.key())) continue;
    const nlohmann::json was = saved.contains(it.key()) ? saved[it.key()] : nlohmann::json();
    std::string flag = it.key();
    std::replace(flag.begin(), flag.end(), '_', '-');
    DPS_CHECK(was == it.value(), ErrorKind::kUsage,
              "--resume: {} was written by a run with --{} {}, but this run has --{} {}", file, flag,
              was.dump(), flag, it.value().dump());
  }
}

std::string TrainConfig::to_json() const {
  nlohmann::ordered_json j;
  j["mode"] = name(mode);
  j["device"] = name(device);
  j["backend"] = name(backend);
  j["devices"] = devices;
  j["preset"] = preset;
  if (gpu_mem_mb > 0.0) j["gpu_mem_mb"] = gpu_mem_mb;
  j["model"] = model;
  j["loss"] = loss;
  j["optim"] = optim;
  j["lr"] = lr;
  j["momentum"] = momentum;
  j["weight_decay"] = weight_decay;
  j["batch"] = batch;
  if (!data.empty()) j["data"] = data;
  if (!dataset.empty()) j["dataset"] = dataset;
  j["shuffle"] = shuffle;
  j["seed"] = seed;
  if (steps >= 0) j["steps"] = steps;
  if (epochs >= 0) j["epochs"] = epochs;
  if (!init.empty()) j["init"] = init;
  if (detail::mode_spec(mode).ranks) {
    j["bucket_mb"] = bucket_cap_mb;  // the flag's name: traces and checkpoints keep it
    j["first_bucket_mb"] = first_bucket_mb;
    j["no_sync_every"] = no_sync_every;
    j["find_unused_parameters"] = find_unused_parameters;
    j["zero"] = zero;
    j["comm_hook"] = comm_hook;
    j["algo"] = algo;
  }
  if (!pitfalls.empty()) j["pitfalls"] = pitfalls;
  if (timing_only) j["timing_only"] = true;
  if (trace_kernels_every > 1) j["trace_kernels_every"] = trace_kernels_every;
  return j.dump();
}

}  // namespace dpscope
