// Tensors and devices: accounting, views, device checks, OOM.
#include <gtest/gtest.h>

#include "dpscope/core/tensor.hpp"

namespace dpscope {
namespace {

TEST(Tensor, PlaceholderCompiles) { EXPECT_EQ(Tensor::zeros({2, 3}).numel(), 6); }

}  // namespace
}  // namespace dpscope
