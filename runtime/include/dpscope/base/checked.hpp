// Checked arithmetic on sizes a user controls (flags, file headers): every overflow, negative size or
// narrowing that loses bits becomes one dpscope::Error naming the quantity, instead of undefined
// behaviour, a hang (a batch count that wrapped to zero) or a wrong answer ("7168 wrong values").
//
//   const int64_t total = checked_add(warmup, iterations, "bench: --warmup + --iters");
//   const int64_t batches = checked_ceil_div(len, batch, "batches per epoch");
//   const size_t n = checked_cast<size_t>(count, "--len");
//   check_fits_in_host_memory(checked_mul<uint64_t>(n, 8, "--len indices"), "--len indices");
//
// Used by the sampler, `dpscope bench`, the data loader and the trace reader. The error kind defaults
// to kInvalidArgument (the CLI exits with code 2); pass kUsage or kFormat where that fits better.
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "dpscope/base/error.hpp"

namespace dpscope {

// a + b, or Error(kind) "<what>: a + b overflows <type>".
template <std::integral T>
T checked_add(T a, T b, std::string_view what, ErrorKind kind = ErrorKind::kInvalidArgument) {
  T sum{};
  DPS_CHECK(!__builtin_add_overflow(a, b, &sum), kind, "{}: {} + {} overflows a {}-bit integer", what, a, b,
            sizeof(T) * 8);
  return sum;
}

// a - b, or Error(kind) "<what>: a - b overflows <type>".
template <std::integral T>
T checked_sub(T a, T b, std::string_view what, ErrorKind kind = ErrorKind::kInvalidArgument) {
  T difference{};
  DPS_CHECK(!__builtin_sub_overflow(a, b, &difference), kind, "{}: {} - {} overflows a {}-bit integer", what,
            a, b, sizeof(T) * 8);
  return difference;
}

// a * b, or Error(kind) "<what>: a * b overflows <type>".
template <std::integral T>
T checked_mul(T a, T b, std::string_view what, ErrorKind kind = ErrorKind::kInvalidArgument) {
  T product{};
  DPS_CHECK(!__builtin_mul_overflow(a, b, &product), kind, "{}: {} * {} overflows a {}-bit integer", what, a,
            b, sizeof(T) * 8);
  return product;
}

// ceil(a / b) for a >= 0 and b > 0 without computing a + b - 1 (which overflows near the maximum:
// a batch count computed that way once made training hang). Throws Error(kind) naming `what` for a < 0 or b
// <= 0.
template <std::integral T>
T checked_ceil_div(T a, T b, std::string_view what, ErrorKind kind = ErrorKind::kInvalidArgument) {
  DPS_CHECK(a >= 0, kind, "{}: cannot divide a negative count {}", what, a);
  DPS_CHECK(b > 0, kind, "{}: the divisor must be positive, got {}", what, b);
  return a / b + (a % b != 0 ? 1 : 0);
}

// `value` as a `To`, or Error(kind) "<what>: <value> does not fit in <bits>-bit (un)signed" when the
// conversion would change it (a negative count into size_t, 2^40 into int32_t).
template <std::integral To, std::integral From>
To checked_cast(From value, std::string_view what, ErrorKind kind = ErrorKind::kInvalidArgument) {
  DPS_CHECK(std::in_range<To>(value), kind, "{}: {} does not fit in a {}-bit {} integer", what, value,
            sizeof(To) * 8, std::is_signed_v<To> ? "signed" : "unsigned");
  return static_cast<To>(value);
}

// The machine's physical memory in bytes (0 when the system does not say).
uint64_t host_memory_bytes();

// Refuses, before allocating, a buffer that cannot fit in this machine's memory, so a huge flag
// value ends in "<what> needs 800.00 TiB of host memory; this machine has 125.00 GiB" instead of a
// raw std::bad_alloc. Throws Error(kind).
void check_fits_in_host_memory(uint64_t bytes, std::string_view what,
                               ErrorKind kind = ErrorKind::kInvalidArgument);

}  // namespace dpscope
