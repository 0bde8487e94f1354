// randperm: PyTorch 1.13's CPU Fisher–Yates shuffle (see data/randperm.hpp).
#include "dpscope/data/randperm.hpp"

#include <numeric>
#include <random>
#include <utility>

#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {

std::vector<int64_t> randperm(int64_t n, uint64_t seed) {
  std::vector<int64_t> r;
  randperm_into(r, n, seed);
  return r;
}

void randperm_into(std::vector<int64_t>& r, int64_t n, uint64_t seed) {
  DPS_CHECK(n >= 0, ErrorKind::kInvalidArgument, "randperm: n must be non-negative, got {}", n);
  check_fits_in_host_memory(
      checked_mul<uint64_t>(static_cast<uint64_t>(n), sizeof(int64_t), "randperm: bytes"),
      fmt::format("randperm({})", n));
  r.resize(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), int64_t{0});
  // std::mt19937 reduces its seed mod 2^32, as at::mt19937 does with manual_seed's 64-bit value.
  std::mt19937 gen(static_cast<std::mt19937::result_type>(seed & 0xFFFFFFFFu));
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<int64_t>(static_cast<uint64_t>(gen()) % static_cast<uint64_t>(n - i));
    std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(i + z)]);
  }
}

}  // namespace dpscope
