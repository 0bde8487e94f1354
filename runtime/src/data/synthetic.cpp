// Seeded synthetic datasets and the "NAME:N[:A[:B]]" spec parser (formulas in data/dataset.hpp).
#include <charconv>
#include <cmath>
#include <numbers>
#include <vector>

#include "dpscope/data/dataset.hpp"
#include "dpscope/data/rng.hpp"

namespace dpscope {

namespace {

constexpr int64_t kMaxClasses = 1000;
constexpr int64_t kMaxFeatures = 100'000;
constexpr const char* kKnownDatasets =
    "spirals:N[:CLASSES], blobs:N[:FEATURES[:CLASSES]], regression:N[:FEATURES[:TARGETS]]";

// Checks one parameter; `where` prefixes the message ("dataset 'spirals:10:1'" or "make_spirals").
void check_range(int64_t value, int64_t low, int64_t high, const char* what, const std::string& where) {
  DPS_CHECK(value >= low && value <= high, ErrorKind::kInvalidArgument,
            "{}: {} must be between {} and {}, got {}", where, what, low, high, value);
}

void check_size(int64_t samples, int64_t features, const std::string& where) {
  check_range(samples, 1, kMaxSyntheticSamples, "the number of samples", where);
  DPS_CHECK(samples * features <= kMaxSyntheticElems, ErrorKind::kInvalidArgument,
            "{}: {} samples x {} values per sample = {} values, over the limit of {}", where, samples,
            features, samples * features, kMaxSyntheticElems);
}

// Sample i's class when N samples are split into K contiguous, near-equal blocks.
int64_t block_class(int64_t i, int64_t samples, int64_t classes) { return i * classes / samples; }

}  // namespace

std::string DatasetSpec::canonical() const {
  if (kind == "spirals") return fmt::format("spirals:{}:{}", samples, classes);
  if (kind == "blobs") return fmt::format("blobs:{}:{}:{}", samples, features, classes);
  return fmt::format("regression:{}:{}:{}", samples, features, targets);
}

DatasetSpec parse_dataset_spec(std::string_view spec) {
  const std::string where = fmt::format("dataset '{}'", spec);
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t colon = spec.find(':', start);
    fields.push_back(
        spec.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  DatasetSpec out;
  out.kind = std::string(fields[0]);
  const bool known = out.kind == "spirals" || out.kind == "blobs" || out.kind == "regression";
  DPS_CHECK(known, ErrorKind::kInvalidArgument, "unknown dataset '{}' in '{}' (known: {})", out.kind, spec,
            kKnownDatasets);
  DPS_CHECK(fields.size() >= 2, ErrorKind::kInvalidArgument,
            "{}: expected NAME:N with a sample count, e.g. {}:1000", where, out.kind);
  const size_t max_params = out.kind == "spirals" ? 1 : 2;
  DPS_CHECK(fields.size() - 2 <= max_params, ErrorKind::kInvalidArgument, "{}: too many fields (known: {})",
            where, kKnownDatasets);

  const auto parse_count = [&](std::string_view text, const char* what) {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    DPS_CHECK(ec == std::errc() && end == text.data() + text.size() && value > 0, ErrorKind::kInvalidArgument,
              "{}: {} '{}' is not a positive integer", where, what, text);
    return value;
  };
  out.samples = parse_count(fields[1], "the sample count");
  if (out.kind == "spirals") {
    out.features = 2;
    out.classes = fields.size() > 2 ? parse_count(fields[2], "CLASSES") : 3;
  } else if (out.kind == "blobs") {
    out.features = fields.size() > 2 ? parse_count(fields[2], "FEATURES") : 2;
    out.classes = fields.size() > 3 ? parse_count(fields[3], "CLASSES") : 3;
  } else {
    out.features = fields.size() > 2 ? parse_count(fields[2], "FEATURES") : 4;
    out.targets = fields.size() > 3 ? parse_count(fields[3], "TARGETS") : 1;
  }
  check_range(out.features, 1, kMaxFeatures, "FEATURES", where);
  if (out.kind == "regression") check_range(out.targets, 1, kMaxFeatures, "TARGETS", where);
  if (out.kind != "regression") check_range(out.classes, 2, kMaxClasses, "CLASSES", where);
  check_size(out.samples, out.features + out.targets, where);
  return out;
}

std::shared_ptr<TensorDataset> make_spirals(int64_t samples, int64_t classes, uint64_t seed) {
  check_size(samples, 2, "make_spirals");
  check_range(classes, 2, kMaxClasses, "classes", "make_spirals");
  SeededRng rng(seed);
  Tensor x = Tensor::empty({samples, 2}, Device::cpu(), MemoryCategory::kBuffers);            // [N, 2]
  Tensor y = Tensor::empty({samples}, Device::cpu(), MemoryCategory::kBuffers, DType::kI64);  // [N]
  float* xs = x.f32();
  int64_t* ys = y.i64();
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t c = block_class(i, samples, classes);
    const double r = rng.uniform();
    const double t = 2.0 * std::numbers::pi * static_cast<double>(c) / static_cast<double>(classes) +
                     4.0 * r + 0.2 * rng.normal();
    xs[2 * i] = static_cast<float>(r * std::sin(t));
    xs[2 * i + 1] = static_cast<float>(r * std::cos(t));
    ys[i] = c;
  }
  return std::make_shared<TensorDataset>(std::move(x), std::move(y), "inputs", "targets",
                                         DatasetSpec{"spirals", samples, 2, classes, 0}.canonical());
}

std::shared_ptr<TensorDataset> make_blobs(int64_t samples, int64_t features, int64_t classes, uint64_t seed) {
  check_range(features, 1, kMaxFeatures, "features", "make_blobs");
  check_size(samples, features, "make_blobs");
  check_range(classes, 2, kMaxClasses, "classes", "make_blobs");
  SeededRng rng(seed);
  std::vector<double> centers(static_cast<size_t>(classes * features));  // [K, F]
  for (double& c : centers) c = rng.uniform(-5.0, 5.0);
  Tensor x = Tensor::empty({samples, features}, Device::cpu(), MemoryCategory::kBuffers);     // [N, F]
  Tensor y = Tensor::empty({samples}, Device::cpu(), MemoryCategory::kBuffers, DType::kI64);  // [N]
  float* xs = x.f32();
  int64_t* ys = y.i64();
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t c = block_class(i, samples, classes);
    for (int64_t f = 0; f < features; ++f)
      xs[i * features + f] =
          static_cast<float>(centers[static_cast<size_t>(c * features + f)] + rng.normal());
    ys[i] = c;
  }
  return std::make_shared<TensorDataset>(std::move(x), std::move(y), "inputs", "targets",
                                         DatasetSpec{"blobs", samples, features, classes, 0}.canonical());
}

std::shared_ptr<TensorDataset> make_regression(int64_t samples, int64_t features, int64_t targets,
                                               uint64_t seed) {
  check_range(features, 1, kMaxFeatures, "features", "make_regression");
  check_range(targets, 1, kMaxFeatures, "targets", "make_regression");
  check_size(samples, features + targets, "make_regression");
  SeededRng rng(seed);
  std::vector<double> w(static_cast<size_t>(features * targets));  // [F, T]
  for (double& v : w) v = rng.normal();
  Tensor x = Tensor::empty({samples, features}, Device::cpu(), MemoryCategory::kBuffers);  // [N, F]
  Tensor y = Tensor::empty({samples, targets}, Device::cpu(), MemoryCategory::kBuffers);   // [N, T]
  float* xs = x.f32();
  float* ys = y.f32();
  std::vector<double> row(static_cast<size_t>(features));
  for (int64_t i = 0; i < samples; ++i) {
    for (int64_t f = 0; f < features; ++f) {
      row[static_cast<size_t>(f)] = rng.normal();
      xs[i * features + f] = static_cast<float>(row[static_cast<size_t>(f)]);
    }
    for (int64_t t = 0; t < targets; ++t) {
      double value = 0.0;
      for (int64_t f = 0; f < features; ++f)
        value += row[static_cast<size_t>(f)] * w[static_cast<size_t>(f * targets + t)];
      ys[i * targets + t] = static_cast<float>(value + 0.1 * rng.normal());
    }
  }
  return std::make_shared<TensorDataset>(
      std::move(x), std::move(y), "inputs", "targets",
      DatasetSpec{"regression", samples, features, 0, targets}.canonical());
}

std::shared_ptr<TensorDataset> make_dataset(const DatasetSpec& spec, uint64_t seed) {
  if (spec.kind == "spirals") return make_spirals(spec.samples, spec.classes, seed);
  if (spec.kind == "blobs") return make_blobs(spec.samples, spec.features, spec.classes, seed);
  if (spec.kind == "regression") return make_regression(spec.samples, spec.features, spec.targets, seed);
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("unknown dataset '{}' (known: {})", spec.kind, kKnownDatasets));
}

std::shared_ptr<TensorDataset> make_dataset(std::string_view spec, uint64_t seed) {
  return make_dataset(parse_dataset_spec(spec), seed);
}

}  // namespace dpscope
