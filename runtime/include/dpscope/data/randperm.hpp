// randperm: PyTorch's CPU torch.randperm(n, generator=torch.Generator().manual_seed(seed)), exactly.
//
// PyTorch 1.13 (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu) fills r = 0..n-1 and runs a
// Fisher–Yates shuffle driven by its 32-bit mt19937 generator:
//   for i in 0 .. n-2:  z = gen() % (n - i);  swap(r[i], r[i + z])
// PyTorch's mt19937 seeded with s equals std::mt19937 seeded with s mod 2^32, so the permutations
// match element for element (checked against torch in tests/runtime/data/randperm_test.cpp).
// 1.13 uses this rule for every n (checked at n = 214,748,364, the later threshold). PyTorch 2.6
// (pytorch/pytorch#143682) keeps it only for n < 2^32 / 20 = 214,748,364 and switches larger n to an
// "inside-out" shuffle drawing 64-bit numbers; dpscope follows 1.13.
//
// Used by DataLoader (shuffle, one permutation per epoch with seed + epoch) and DistributedSampler.
#pragma once

#include <cstdint>
#include <vector>

namespace dpscope {

// A permutation of 0..n-1; throws kInvalidArgument for n < 0 (PyTorch: "n must be non-negative").
std::vector<int64_t> randperm(int64_t n, uint64_t seed);
// The same permutation written into `out` (resized to n, its capacity kept: a caller that appends
// to it reserves first, so that no second copy of a large order is ever made).
void randperm_into(std::vector<int64_t>& out, int64_t n, uint64_t seed);

}  // namespace dpscope
