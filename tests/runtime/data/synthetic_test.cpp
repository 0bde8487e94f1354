// Synthetic datasets: the spec parser, the documented formulas and draw order, determinism per seed.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "dpscope/data/dataset.hpp"
#include "dpscope/data/rng.hpp"
#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

TEST(DatasetSpec, FillsInDefaults) {
  const DatasetSpec spirals = parse_dataset_spec("spirals:1000");
  EXPECT_EQ(spirals.kind, "spirals");
  EXPECT_EQ(spirals.samples, 1000);
  EXPECT_EQ(spirals.features, 2);
  EXPECT_EQ(spirals.classes, 3);
  EXPECT_EQ(spirals.canonical(), "spirals:1000:3");
  EXPECT_EQ(parse_dataset_spec("spirals:10:5").canonical(), "spirals:10:5");
  EXPECT_EQ(parse_dataset_spec("blobs:50").canonical(), "blobs:50:2:3");
  EXPECT_EQ(parse_dataset_spec("blobs:50:8").canonical(), "blobs:50:8:3");
  EXPECT_EQ(parse_dataset_spec("blobs:50:8:4").canonical(), "blobs:50:8:4");
  const DatasetSpec regression = parse_dataset_spec("regression:20");
  EXPECT_EQ(regression.features, 4);
  EXPECT_EQ(regression.targets, 1);
  EXPECT_EQ(regression.classes, 0);
  EXPECT_EQ(parse_dataset_spec("regression:20:3:2").canonical(), "regression:20:3:2");
}

TEST(DatasetSpec, RefusesBadSpecsWithAReason) {
  const std::string known =
      "known: spirals:N[:CLASSES], blobs:N[:FEATURES[:CLASSES]], regression:N[:FEATURES[:TARGETS]]";
  EXPECT_DPS_ERROR(parse_dataset_spec("mnist:100"), ErrorKind::kInvalidArgument,
                   "unknown dataset 'mnist' in 'mnist:100' (" + known + ")");
  EXPECT_DPS_ERROR(parse_dataset_spec(""), ErrorKind::kInvalidArgument,
                   "unknown dataset '' in '' (" + known + ")");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals': expected NAME:N with a sample count, e.g. spirals:1000");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals:abc"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals:abc': the sample count 'abc' is not a positive integer");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals:"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals:': the sample count '' is not a positive integer");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals:0"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals:0': the sample count '0' is not a positive integer");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals:1e3"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals:1e3': the sample count '1e3' is not a positive integer");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals:10:3:4"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals:10:3:4': too many fields (" + known + ")");
  EXPECT_DPS_ERROR(parse_dataset_spec("blobs:10:x"), ErrorKind::kInvalidArgument,
                   "dataset 'blobs:10:x': FEATURES 'x' is not a positive integer");
  EXPECT_DPS_ERROR(parse_dataset_spec("spirals:10:1"), ErrorKind::kInvalidArgument,
                   "dataset 'spirals:10:1': CLASSES must be between 2 and 1000, got 1");
  EXPECT_DPS_ERROR(
      parse_dataset_spec("spirals:20000000"), ErrorKind::kInvalidArgument,
      "dataset 'spirals:20000000': the number of samples must be between 1 and 10000000, got 20000000");
  EXPECT_DPS_ERROR(
      parse_dataset_spec("blobs:10000000:100"), ErrorKind::kInvalidArgument,
      "dataset 'blobs:10000000:100': 10000000 samples x 100 values per sample = 1000000000 values, over "
      "the limit of 268435456");
}

TEST(Spirals, ShapesNameAndClassBlocks) {
  const auto d = make_dataset("spirals:10", 0);
  EXPECT_EQ(d->name(), "spirals:10:3");
  EXPECT_EQ(d->inputs().shape(), (Shape{10, 2}));
  EXPECT_EQ(d->targets().shape(), (Shape{10}));
  EXPECT_EQ(d->num_classes(), 3);
  // class of sample i = floor(i * 3 / 10)
  EXPECT_EQ(d->targets().to_ints(), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 2, 2, 2}));
}

TEST(Spirals, FollowsTheDocumentedFormulaAndDrawOrder) {
  const uint64_t seed = 11;
  const auto d = make_spirals(4, 2, seed);
  SeededRng rng(seed);
  const float* x = d->inputs().f32();
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t c = i * 2 / 4;
    const double r = rng.uniform();
    const double t = 2.0 * std::numbers::pi * static_cast<double>(c) / 2.0 + 4.0 * r + 0.2 * rng.normal();
    EXPECT_EQ(x[2 * i], static_cast<float>(r * std::sin(t))) << i;
    EXPECT_EQ(x[2 * i + 1], static_cast<float>(r * std::cos(t))) << i;
  }
}

TEST(Spirals, PointsLieInsideTheUnitDisk) {
  const auto d = make_spirals(2000, 4, 3);
  const float* x = d->inputs().f32();
  for (int64_t i = 0; i < 2000; ++i) ASSERT_LT(std::hypot(x[2 * i], x[2 * i + 1]), 1.0 + 1e-6) << i;
  const std::vector<int64_t> y = d->targets().to_ints();
  EXPECT_EQ(std::count(y.begin(), y.end(), 0), 500);
  EXPECT_EQ(std::count(y.begin(), y.end(), 3), 500);
}

TEST(SyntheticDatasets, SameSeedSameDataOtherSeedOtherData) {
  for (const char* spec : {"spirals:300", "blobs:300:3:4", "regression:300:3:2"}) {
    SCOPED_TRACE(spec);
    const auto a = make_dataset(spec, 5);
    const auto b = make_dataset(spec, 5);
    const auto c = make_dataset(spec, 6);
    EXPECT_EQ(a->inputs().to_vector(), b->inputs().to_vector());
    EXPECT_NE(a->inputs().to_vector(), c->inputs().to_vector());
    if (a->target_dtype() == DType::kI64) {
      EXPECT_EQ(a->targets().to_ints(), b->targets().to_ints());
    } else {
      EXPECT_EQ(a->targets().to_vector(), b->targets().to_vector());
      EXPECT_NE(a->targets().to_vector(), c->targets().to_vector());
    }
  }
}

TEST(Blobs, ClassesAreUnitGaussiansAroundTheFirstDrawnCenters) {
  constexpr int64_t kN = 30000;
  const auto d = make_blobs(kN, 2, 3, 9);
  EXPECT_EQ(d->name(), "blobs:30000:2:3");
  EXPECT_EQ(d->inputs().shape(), (Shape{kN, 2}));
  SeededRng rng(9);
  std::vector<double> centers(6);
  for (double& c : centers) c = rng.uniform(-5.0, 5.0);
  const float* x = d->inputs().f32();
  const int64_t* y = d->targets().i64();
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t f = 0; f < 2; ++f) {
      double sum = 0.0;
      double sum_sq = 0.0;
      int64_t count = 0;
      for (int64_t i = 0; i < kN; ++i) {
        if (y[i] != c) continue;
        sum += x[i * 2 + f];
        sum_sq += x[i * 2 + f] * x[i * 2 + f];
        ++count;
      }
      ASSERT_EQ(count, kN / 3);
      const double mean = sum / static_cast<double>(count);
      EXPECT_NEAR(mean, centers[static_cast<size_t>(c * 2 + f)], 0.05) << "class " << c;  // 5 standard errors
      EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(count) - mean * mean), 1.0, 0.04) << "class " << c;
    }
  }
}

TEST(Regression, TargetsAreLinearInTheInputsPlusSmallNoise) {
  constexpr int64_t kN = 20000;
  const auto d = make_regression(kN, 2, 1, 4);
  EXPECT_EQ(d->inputs().shape(), (Shape{kN, 2}));
  EXPECT_EQ(d->targets().shape(), (Shape{kN, 1}));
  EXPECT_EQ(d->num_classes(), 0);
  EXPECT_EQ(d->target_dtype(), DType::kF32);
  SeededRng rng(4);
  const double w0 = rng.normal();
  const double w1 = rng.normal();
  // Least squares fit of y = a x0 + b x1 through the 2 x 2 normal equations.
  const float* x = d->inputs().f32();
  const float* y = d->targets().f32();
  double s00 = 0, s01 = 0, s11 = 0, t0 = 0, t1 = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const double a = x[2 * i], b = x[2 * i + 1];
    s00 += a * a;
    s01 += a * b;
    s11 += b * b;
    t0 += a * y[i];
    t1 += b * y[i];
  }
  const double det = s00 * s11 - s01 * s01;
  const double fit0 = (s11 * t0 - s01 * t1) / det;
  const double fit1 = (s00 * t1 - s01 * t0) / det;
  EXPECT_NEAR(fit0, w0, 0.005);
  EXPECT_NEAR(fit1, w1, 0.005);
  double residual_sq = 0.0;
  for (int64_t i = 0; i < kN; ++i) {
    const double r = y[i] - (w0 * x[2 * i] + w1 * x[2 * i + 1]);
    residual_sq += r * r;
  }
  EXPECT_NEAR(std::sqrt(residual_sq / kN), 0.1, 0.004);
}

TEST(SyntheticDatasets, GeneratorsCheckTheirArguments) {
  EXPECT_DPS_ERROR(make_spirals(0, 3, 0), ErrorKind::kInvalidArgument,
                   "make_spirals: the number of samples must be between 1 and 10000000, got 0");
  EXPECT_DPS_ERROR(make_spirals(10, 1, 0), ErrorKind::kInvalidArgument,
                   "make_spirals: classes must be between 2 and 1000, got 1");
  EXPECT_DPS_ERROR(make_blobs(10, 0, 3, 0), ErrorKind::kInvalidArgument,
                   "make_blobs: features must be between 1 and 100000, got 0");
  EXPECT_DPS_ERROR(make_regression(10, 4, 0, 0), ErrorKind::kInvalidArgument,
                   "make_regression: targets must be between 1 and 100000, got 0");
}

}  // namespace
}  // namespace dpscope
