// ascii_lower (base/ascii.hpp): the words users type compare in any case; nothing but A-Z changes.
#include "dpscope/base/ascii.hpp"

#include <gtest/gtest.h>

namespace dpscope {
namespace {

TEST(AsciiLower, LowersAToZOnly) {
  EXPECT_EQ(ascii_lower("NVLS"), "nvls");
  EXPECT_EQ(ascii_lower("LL128 Simple_x-9"), "ll128 simple_x-9");
  EXPECT_EQ(ascii_lower(""), "");
  // Bytes of UTF-8 (and every other byte above 0x7f) pass as they are: "RÉSEAU" keeps its É.
  EXPECT_EQ(ascii_lower("R\xc3\x89SEAU"), "r\xc3\x89seau");
  EXPECT_EQ(ascii_lower("@[`{"), "@[`{");  // the neighbours of A-Z and a-z
}

}  // namespace
}  // namespace dpscope
