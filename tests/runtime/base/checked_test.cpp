// Checked arithmetic (base/checked.hpp): exact results up to the limits, one clear error past them.
#include "dpscope/base/checked.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::what_of;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedAdd, ExactUpToTheLimit) {
  EXPECT_EQ(checked_add<int64_t>(kMax - 1, 1, "x"), kMax);
  EXPECT_EQ(checked_add<int64_t>(kMin, kMax, "x"), -1);
  EXPECT_EQ(checked_add<int32_t>(2147483646, 1, "x"), 2147483647);
}

TEST(CheckedAdd, OverflowNamesTheQuantity) {
  EXPECT_EQ(what_of([] { checked_add<int32_t>(2147483647, 5, "bench: warmup + iterations"); }),
            "bench: warmup + iterations: 2147483647 + 5 overflows a 32-bit integer");
  EXPECT_EQ(what_of([] { checked_add<int64_t>(kMin, -1, "offset"); }),
            "offset: -9223372036854775808 + -1 overflows a 64-bit integer");
}

TEST(CheckedSub, UnderflowOfUnsigned) {
  EXPECT_EQ(checked_sub<uint64_t>(5, 5, "x"), 0u);
  EXPECT_EQ(what_of([] { checked_sub<uint64_t>(3, 4, "bytes left"); }),
            "bytes left: 3 - 4 overflows a 64-bit integer");
}

TEST(CheckedMul, ExactUpToTheLimitAndRefusedPastIt) {
  EXPECT_EQ(checked_mul<int64_t>(4611686018427387903, 2, "x"), kMax - 1);
  EXPECT_EQ(checked_mul<uint64_t>(1ull << 32, 1ull << 31, "x"), 1ull << 63);
  EXPECT_EQ(what_of([] { checked_mul<uint64_t>(1ull << 32, 1ull << 32, "slices * bytes"); }),
            "slices * bytes: 4294967296 * 4294967296 overflows a 64-bit integer");
  EXPECT_EQ(what_of([] { checked_mul<int64_t>(-1, kMin, "scale"); }),
            "scale: -1 * -9223372036854775808 overflows a 64-bit integer");
}

TEST(CheckedCeilDiv, NoOverflowAtTheMaximum) {
  // (m + b - 1) / b overflows here: the batch count that once made training hang.
  EXPECT_EQ(checked_ceil_div<int64_t>(100, kMax, "batches"), 1);
  EXPECT_EQ(checked_ceil_div<int64_t>(kMax, kMax, "batches"), 1);
  EXPECT_EQ(checked_ceil_div<int64_t>(kMax, 2, "batches"), 4611686018427387904);
  EXPECT_EQ(checked_ceil_div<int64_t>(0, 7, "batches"), 0);
  EXPECT_EQ(checked_ceil_div<int64_t>(10, 4, "batches"), 3);
  EXPECT_EQ(checked_ceil_div<int64_t>(12, 4, "batches"), 3);
}

TEST(CheckedCeilDiv, RefusesNegativeCountsAndNonPositiveDivisors) {
  EXPECT_EQ(what_of([] { checked_ceil_div<int64_t>(10, 0, "batches per epoch"); }),
            "batches per epoch: the divisor must be positive, got 0");
  EXPECT_EQ(what_of([] { checked_ceil_div<int64_t>(-3, 2, "batches per epoch"); }),
            "batches per epoch: cannot divide a negative count -3");
}

TEST(CheckedCast, KeepsValuesThatFit) {
  EXPECT_EQ(checked_cast<size_t>(int64_t{0}, "x"), 0u);
  EXPECT_EQ(checked_cast<int32_t>(int64_t{2147483647}, "x"), 2147483647);
  EXPECT_EQ(checked_cast<int32_t>(int64_t{-2147483648LL}, "x"), -2147483647 - 1);
  EXPECT_EQ(checked_cast<int64_t>(uint64_t{9223372036854775807ULL}, "x"), kMax);
}

TEST(CheckedCast, RefusesValuesThatChange) {
  EXPECT_EQ(what_of([] { checked_cast<size_t>(int64_t{-1}, "--len"); }),
            "--len: -1 does not fit in a 64-bit unsigned integer");
  EXPECT_EQ(what_of([] { checked_cast<int32_t>(int64_t{2147483648LL}, "-n"); }),
            "-n: 2147483648 does not fit in a 32-bit signed integer");
  EXPECT_EQ(what_of([] { checked_cast<int64_t>(uint64_t{1ull << 63}, "--seed"); }),
            "--seed: 9223372036854775808 does not fit in a 64-bit signed integer");
}

TEST(CheckedKinds, DefaultIsInvalidArgumentAndCallersMayChoose) {
  try {
    checked_add<int32_t>(2147483647, 1, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_TRUE(e.is_usage_error());
  }
  try {
    checked_mul<int64_t>(kMax, 2, "header size", ErrorKind::kFormat);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  }
}

TEST(HostMemory, RefusesWhatCannotFitAndAcceptsWhatCan) {
  const uint64_t total = host_memory_bytes();
  ASSERT_GT(total, 0u) << "sysconf reports no physical memory on this machine";
  EXPECT_NO_THROW(check_fits_in_host_memory(1024, "a small buffer"));
  const std::string message = what_of([] { check_fits_in_host_memory(1ull << 52, "--len indices"); });
  EXPECT_EQ(message.rfind("--len indices needs 4096.00 TiB of host memory; this machine has ", 0), 0u)
      << message;
}

}  // namespace
}  // namespace dpscope
