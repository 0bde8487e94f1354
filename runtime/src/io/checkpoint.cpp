// Checkpoint files (see the header): safetensors + metadata + checksum over both, atomic, owned by
// one run, the newest valid one taken on resume.
#include "dpscope/io/checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <random>
#include <regex>

#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/io/finite_values.hpp"

namespace dpscope {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kModelPrefix = "model.";
constexpr std::string_view kOptimPrefix = "optim.";
constexpr std::string_view kFileNamePrefix = "checkpoint-";
// Version 2: the checksum covers the metadata and the tensors' dtypes and shapes; a run id.
constexpr const char* kFormatTag = "dpscope-checkpoint-2";
constexpr const char* kFormatTagV1 = "dpscope-checkpoint-1";

uint64_t hash_text(std::string_view text, uint64_t h) {
  const uint64_t size = text.size();
  h = fnv1a64(&size, sizeof size, h);  // length-prefixed, so "ab"+"c" and "a"+"bc" differ
  return fnv1a64(text.data(), text.size(), h);
}

int64_t parse_int(const SafetensorsMetadata& meta, const std::string& key, const std::string& source) {
  auto it = meta.find(key);
  DPS_CHECK(it != meta.end(), ErrorKind::kFormat, "checkpoint {}: metadata has no '{}'", source, key);
  int64_t value = 0;
  const std::string& s = it->second;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  DPS_CHECK(ec == std::errc() && ptr == s.data() + s.size() && value >= 0, ErrorKind::kFormat,
            "checkpoint {}: metadata '{}' is not a non-negative integer: '{}'", source, key, s);
  return value;
}

// checkpoint-00000040.safetensors → 40.
std::optional<int64_t> step_of(const fs::path& file) {
  static const std::regex pattern(R"(checkpoint-(\d{8,18})\.safetensors)");
  std::smatch m;
  const std::string name = file.filename().string();
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

struct Listed {
  int64_t step = 0;
  fs::path file;
};

// Every checkpoint file in `dir`, by step (oldest first).
std::vector<Listed> list_checkpoints(const fs::path& dir) {
  std::vector<Listed> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (auto step = step_of(entry.path())) found.push_back({*step, entry.path()});
  std::sort(found.begin(), found.end(), [](const Listed& a, const Listed& b) { return a.step < b.step; });
  return found;
}

// The run id in a checkpoint's metadata, without verifying its tensors; nullopt when the header
// cannot be read or has none (another program's file, a damaged one, a version-1 checkpoint), when
// the file is not a regular file (never opened: a FIFO would block), or when the step in its name is
// not the step inside (a renamed file: never counted in rotation, never deleted).
std::optional<std::string> run_id_of(const fs::path& file) {
  if (!why_not_readable(file).empty()) return std::nullopt;
  try {
    const SafetensorsMetadata meta = read_safetensors_metadata(file);
    const auto format = meta.find("format");
    const auto id = meta.find("run_id");
    const auto steps = meta.find("steps_done");
    if (format == meta.end() || format->second != kFormatTag || id == meta.end()) return std::nullopt;
    if (steps == meta.end() || step_of(file) != parse_int(meta, "steps_done", file.string()))
      return std::nullopt;
    return id->second;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Refuses (kFormat) values a run cannot continue from: NaN or inf anywhere, a negative second
// moment (Adam's sqrt would make NaN of it) or a step count that is not a whole number >= 0.
void check_checkpoint_values(const std::string& source, const std::string& name, const Tensor& t) {
  if (const std::optional<NonFiniteValue> bad = first_non_finite(t))
    throw Error(ErrorKind::kFormat,
                fmt::format("checkpoint {}: tensor '{}' holds {} at {}; a checkpoint holds "
                            "finite numbers only",
                            source, name, bad->value, bad->position));
  if (!t.has_data() || t.dtype() != DType::kF32) return;
  const auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool second_moment = ends_with(".exp_avg_sq");  // also .max_exp_avg_sq
  const bool step = ends_with(".step");
  if (!second_moment && !step) return;
  const float* values = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = values[i];
    DPS_CHECK(v >= 0.0f && (!step || v == std::floor(v)), ErrorKind::kFormat,
              "checkpoint {}: optimizer state '{}' holds {} at index {}; {}", source, name, v, i,
              step ? "a step count is a whole number >= 0" : "a second moment is >= 0");
  }
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t size_bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size_bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string checkpoint_checksum(const SafetensorsMetadata& metadata, const NamedTensors& tensors) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [key, value] : metadata) {  // std::map: sorted by key, so the order is fixed
    if (key == "checksum") continue;
    h = hash_text(value, hash_text(key, h));
  }
  for (const auto& [name, t] : tensors) {
    h = hash_text(name, h);
    h = hash_text(to_string(t.dtype()), h);
    for (int64_t extent : t.shape()) h = fnv1a64(&extent, sizeof extent, h);
    if (t.nbytes() > 0 && t.has_data())
      h = fnv1a64(
          t.dtype() == DType::kF32 ? static_cast<const void*>(t.f32()) : static_cast<const void*>(t.i64()),
          t.nbytes(), h);
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

std::string new_run_id() {
  std::random_device entropy;
  const uint64_t clock = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  const uint64_t random = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  return fmt::format("{:016x}", random ^ (clock * 0x9e3779b97f4a7c15ULL));
}

void check_fresh_checkpoint_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  DPS_CHECK(!ec, ErrorKind::kUsage, "--checkpoint-dir '{}': cannot create the directory: {}", dir.string(),
            ec.message());
  DPS_CHECK(fs::is_directory(dir, ec), ErrorKind::kUsage, "--checkpoint-dir '{}' is not a directory",
            dir.string());
  {
    // A probe the destructor removes: proves a checkpoint can be created here before training starts.
    try {
      AtomicFileWriter probe(dir / "checkpoint-write-probe");
    } catch (const Error& e) {
      throw Error(ErrorKind::kUsage, fmt::format("--checkpoint-dir: {}", e.what()));
    }
  }
  const std::vector<Listed> existing = list_checkpoints(dir);
  if (existing.empty()) return;
  const fs::path& newest = existing.back().file;
  const std::optional<std::string> owner = run_id_of(newest);
  throw Error(ErrorKind::kUsage,
              fmt::format("--checkpoint-dir {} already holds checkpoints of another run (newest: {}, {}); "
                          "continue that run with --resume or choose another directory",
                          dir.string(), newest.filename().string(),
                          owner ? fmt::format("run {}", *owner) : std::string("unreadable")));
}

fs::path save_checkpoint(const fs::path& dir, const CheckpointState& state, int keep) {
  DPS_CHECK(keep >= 1, ErrorKind::kInvalidArgument, "save_checkpoint: keep must be at least 1, got {}", keep);
  DPS_CHECK(state.steps_done >= 0, ErrorKind::kInvalidArgument,
            "save_checkpoint: steps_done must be >= 0, got {}", state.steps_done);
  std::error_code ec;
  fs::create_directories(dir, ec);
  DPS_CHECK(!ec, ErrorKind::kIo, "cannot create checkpoint directory '{}': {}", dir.string(), ec.message());
  remove_stale_temp_files(dir, kFileNamePrefix);

  // Ownership: files whose run id is readable and differs belong to another run and stay untouched;
  // writing next to them would make a later --resume pick whichever has more steps.
  std::vector<Listed> mine;
  for (const Listed& c : list_checkpoints(dir)) {
    const std::optional<std::string> owner = run_id_of(c.file);
    if (!owner) continue;  // damaged or foreign: never deleted by the rotation
    DPS_CHECK(*owner == state.run_id, ErrorKind::kUsage,
              "checkpoint directory {} holds {} of another run (run {}, this run is {}); continue that "
              "run with --resume or choose another directory",
              dir.string(), c.file.filename().string(), *owner, state.run_id);
    mine.push_back(c);
  }

  NamedTensors tensors;
  for (const auto& [name, t] : state.model)
    tensors.emplace_back(std::string(kModelPrefix) + name, t.to(Device::cpu()));
  for (const auto& [name, t] : state.optimizer)
    tensors.emplace_back(std::string(kOptimPrefix) + name, t.to(Device::cpu()));
  SafetensorsMetadata metadata = {
      {"format", kFormatTag},
      {"run_id", state.run_id},
      {"steps_done", std::to_string(state.steps_done)},
      {"epoch", std::to_string(state.epoch)},
      {"batch_in_epoch", std::to_string(state.batch_in_epoch)},
      {"config", state.config_json},
  };
  metadata["checksum"] = checkpoint_checksum(metadata, tensors);
  const fs::path file = dir / fmt::format("checkpoint-{:08}.safetensors", state.steps_done);
  try {
    save_safetensors(file, tensors, metadata);  // atomic: temp file, fsync, rename
  } catch (const Error& e) {
    // Training has run: a checkpoint that cannot be written (disk full) is a runtime failure.
    if (e.kind() != ErrorKind::kIo && e.kind() != ErrorKind::kWriteFailed) throw;
    throw Error(ErrorKind::kWriteFailed, fmt::format("cannot write checkpoint {}", e.what()));
  }

  // Rotation among this run's files only: the one just written, then the others newest first.
  std::erase_if(mine, [&](const Listed& c) { return c.file.filename() == file.filename(); });
  std::sort(mine.begin(), mine.end(), [](const Listed& a, const Listed& b) { return a.step > b.step; });
  for (size_t i = static_cast<size_t>(keep) - 1; i < mine.size(); ++i) fs::remove(mine[i].file, ec);
  return file;
}

CheckpointState decode_checkpoint(const SafetensorsMetadata& meta, NamedTensors tensors,
                                  const std::string& source) {
  auto format = meta.find("format");
  DPS_CHECK(format == meta.end() || format->second != kFormatTagV1, ErrorKind::kFormat,
            "checkpoint {}: written by an older dpscope (format '{}') whose checksum does not cover its "
            "metadata; start a fresh run",
            source, kFormatTagV1);
  DPS_CHECK(format != meta.end() && format->second == kFormatTag, ErrorKind::kFormat,
            "checkpoint {}: not a dpscope checkpoint (metadata 'format' is not '{}')", source, kFormatTag);
  auto stored = meta.find("checksum");
  DPS_CHECK(stored != meta.end(), ErrorKind::kFormat, "checkpoint {}: metadata has no 'checksum'", source);
  const std::string actual = checkpoint_checksum(meta, tensors);
  DPS_CHECK(stored->second == actual, ErrorKind::kFormat,
            "checkpoint {} is corrupted: checksum {} does not match its contents ({})", source,
            stored->second, actual);
  CheckpointState state;
  auto run_id = meta.find("run_id");
  DPS_CHECK(run_id != meta.end(), ErrorKind::kFormat, "checkpoint {}: metadata has no 'run_id'", source);
  state.run_id = run_id->second;
  state.steps_done = parse_int(meta, "steps_done", source);
  state.epoch = parse_int(meta, "epoch", source);
  state.batch_in_epoch = parse_int(meta, "batch_in_epoch", source);
  auto config = meta.find("config");
  state.config_json = config == meta.end() ? "{}" : config->second;
  for (auto& [name, t] : tensors) {
    check_checkpoint_values(source, name, t);
    if (name.rfind(kModelPrefix, 0) == 0) {
      state.model.emplace_back(name.substr(kModelPrefix.size()), t);
    } else if (name.rfind(kOptimPrefix, 0) == 0) {
      state.optimizer.emplace_back(name.substr(kOptimPrefix.size()), t);
    } else {
      throw Error(ErrorKind::kFormat, fmt::format("checkpoint {}: unexpected tensor '{}'", source, name));
    }
  }
  return state;
}

CheckpointState load_checkpoint(const fs::path& file) {
  // The file's type first: a directory, a device, a FIFO (whose open would block) or a symlink loop
  // is named as such, never opened.
  if (const std::string why = why_not_readable(file); !why.empty())
    throw Error(ErrorKind::kIo, fmt::format("checkpoint {}: {}", file.string(), why));
  NamedTensors tensors;
  SafetensorsMetadata meta;
  try {
    meta = read_safetensors_metadata(file);
    tensors = load_safetensors(file);
  } catch (const Error& e) {
    throw Error(e.kind() == ErrorKind::kIo ? ErrorKind::kIo : ErrorKind::kFormat,
                fmt::format("checkpoint {} is damaged: {}", file.string(), e.what()));
  }
  CheckpointState state = decode_checkpoint(meta, std::move(tensors), file.string());
  // The name is what --resume and the rotation sort by: a file renamed from checkpoint-00000006 to
  // checkpoint-00000099 would be resumed from as the newest and would outlive the real newer ones.
  const std::optional<int64_t> named_step = step_of(file);
  DPS_CHECK(!named_step || *named_step == state.steps_done, ErrorKind::kFormat,
            "checkpoint {}: its name says step {} but it holds the state after step {} (renamed?); it is "
            "ignored",
            file.string(), *named_step, state.steps_done);
  return state;
}

ResumeCheckpoint load_newest_valid_checkpoint(const fs::path& dir) {
  const std::vector<Listed> all = list_checkpoints(dir);
  DPS_CHECK(!all.empty(), ErrorKind::kUsage, "--resume: no checkpoint in '{}'", dir.string());
  std::optional<Error> newest_failure;
  std::string skipped;  // every newer file passed over, "; "-joined: one warning line names them all
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      ResumeCheckpoint taken{it->file, load_checkpoint(it->file), ""};
      if (newest_failure)
        taken.warning = fmt::format("{}; resuming from {} instead, the newest valid checkpoint", skipped,
                                    it->file.string());
      return taken;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kFormat && e.kind() != ErrorKind::kIo) throw;
      if (!newest_failure) newest_failure = e;
      skipped += (skipped.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  throw Error(newest_failure->kind(),
              fmt::format("{}; no older checkpoint in {} is valid", newest_failure->what(), dir.string()));
}

void check_resume_position(const CheckpointState& state, const fs::path& file, int64_t total_steps,
                           int64_t batches_per_epoch) {
  DPS_CHECK(state.steps_done <= total_steps, ErrorKind::kUsage,
            "--resume: {} is after step {}, past the end of this run ({} steps); ask for at least {} steps",
            file.string(), state.steps_done, total_steps, state.steps_done);
  DPS_CHECK(batches_per_epoch > 0, ErrorKind::kInvalidArgument,
            "check_resume_position: batches_per_epoch must be positive, got {}", batches_per_epoch);
  // Steps run epoch after epoch from (0, 0), so the next step's position follows from the steps done.
  const int64_t epoch_start =
      checked_mul(state.epoch, batches_per_epoch, "checkpoint epoch * batches", ErrorKind::kFormat);
  const bool consistent = state.batch_in_epoch < batches_per_epoch &&
                          checked_add(epoch_start, state.batch_in_epoch, "checkpoint position",
                                      ErrorKind::kFormat) == state.steps_done;
  DPS_CHECK(consistent, ErrorKind::kFormat,
            "checkpoint {}: its position (epoch {}, batch {}) does not follow from {} steps done at {} "
            "batches per epoch",
            file.string(), state.epoch, state.batch_in_epoch, state.steps_done, batches_per_epoch);
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  const auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().file;
}

}  // namespace dpscope
