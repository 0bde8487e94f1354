// Checkpoint files (see the header): safetensors + metadata + checksum, atomic, newest kept.
#include "dpscope/train/checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <regex>

#include "dpscope/base/error.hpp"
#include "dpscope/io/safetensors.hpp"

namespace dpscope {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kModelPrefix = "model.";
constexpr std::string_view kOptimPrefix = "optim.";
constexpr const char* kFormatTag = "dpscope-checkpoint-1";

uint64_t checksum(const NamedTensors& tensors) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [name, t] : tensors) {
    h = fnv1a64(name.data(), name.size(), h);
    if (t.nbytes() > 0)
      h = fnv1a64(
          t.dtype() == DType::kF32 ? static_cast<const void*>(t.f32()) : static_cast<const void*>(t.i64()),
          t.nbytes(), h);
  }
  return h;
}

int64_t parse_int(const SafetensorsMetadata& meta, const std::string& key, const fs::path& file) {
  auto it = meta.find(key);
  DPS_CHECK(it != meta.end(), ErrorKind::kFormat, "checkpoint {}: metadata has no '{}'", file.string(), key);
  int64_t value = 0;
  const std::string& s = it->second;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  DPS_CHECK(ec == std::errc() && ptr == s.data() + s.size() && value >= 0, ErrorKind::kFormat,
            "checkpoint {}: metadata '{}' is not a non-negative integer: '{}'", file.string(), key, s);
  return value;
}

// checkpoint-00000040.safetensors → 40.
std::optional<int64_t> step_of(const fs::path& file) {
  static const std::regex pattern(R"(checkpoint-(\d{8,})\.safetensors)");
  std::smatch m;
  const std::string name = file.filename().string();
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (auto step = step_of(entry.path())) found.emplace_back(*step, entry.path());
  std::sort(found.begin(), found.end());
  return found;
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

fs::path save_checkpoint(const fs::path& dir, const CheckpointState& state, int keep) {
  DPS_CHECK(keep >= 1, ErrorKind::kInvalidArgument, "save_checkpoint: keep must be at least 1, got {}", keep);
  std::error_code ec;
  fs::create_directories(dir, ec);
  DPS_CHECK(!ec, ErrorKind::kIo, "cannot create checkpoint directory '{}': {}", dir.string(), ec.message());
  NamedTensors tensors;
  for (const auto& [name, t] : state.model)
    tensors.emplace_back(std::string(kModelPrefix) + name, t.to(Device::cpu()));
  for (const auto& [name, t] : state.optimizer)
    tensors.emplace_back(std::string(kOptimPrefix) + name, t.to(Device::cpu()));
  const SafetensorsMetadata metadata = {
      {"format", kFormatTag},
      {"steps_done", std::to_string(state.steps_done)},
      {"epoch", std::to_string(state.epoch)},
      {"batch_in_epoch", std::to_string(state.batch_in_epoch)},
      {"config", state.config_json},
      {"checksum", fmt::format("fnv1a64:{:016x}", checksum(tensors))},
  };
  const fs::path file = dir / fmt::format("checkpoint-{:08}.safetensors", state.steps_done);
  save_safetensors(file, tensors, metadata);  // atomic: temp file, fsync, rename
  const auto all = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) fs::remove(all[i].second, ec);
  return file;
}

CheckpointState load_checkpoint(const fs::path& file) {
  std::error_code ec;
  DPS_CHECK(fs::is_regular_file(file, ec), ErrorKind::kIo, "checkpoint {}: no such file", file.string());
  NamedTensors tensors;
  SafetensorsMetadata meta;
  try {
    meta = read_safetensors_metadata(file);
    tensors = load_safetensors(file);
  } catch (const Error& e) {
    throw Error(ErrorKind::kFormat, fmt::format("checkpoint {} is damaged: {}", file.string(), e.what()));
  }
  auto format = meta.find("format");
  DPS_CHECK(format != meta.end() && format->second == kFormatTag, ErrorKind::kFormat,
            "checkpoint {}: not a dpscope checkpoint (metadata 'format' is not '{}')", file.string(),
            kFormatTag);
  auto stored = meta.find("checksum");
  DPS_CHECK(stored != meta.end(), ErrorKind::kFormat, "checkpoint {}: metadata has no 'checksum'",
            file.string());
  const std::string actual = fmt::format("fnv1a64:{:016x}", checksum(tensors));
  DPS_CHECK(stored->second == actual, ErrorKind::kFormat,
            "checkpoint {} is corrupted: checksum {} does not match its contents ({})", file.string(),
            stored->second, actual);
  CheckpointState state;
  state.steps_done = parse_int(meta, "steps_done", file);
  state.epoch = parse_int(meta, "epoch", file);
  state.batch_in_epoch = parse_int(meta, "batch_in_epoch", file);
  auto config = meta.find("config");
  state.config_json = config == meta.end() ? "{}" : config->second;
  for (auto& [name, t] : tensors) {
    if (name.rfind(kModelPrefix, 0) == 0) {
      state.model.emplace_back(name.substr(kModelPrefix.size()), t);
    } else if (name.rfind(kOptimPrefix, 0) == 0) {
      state.optimizer.emplace_back(name.substr(kOptimPrefix.size()), t);
    } else {
      throw Error(ErrorKind::kFormat,
                  fmt::format("checkpoint {}: unexpected tensor '{}'", file.string(), name));
    }
  }
  return state;
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  const auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

}  // namespace dpscope
