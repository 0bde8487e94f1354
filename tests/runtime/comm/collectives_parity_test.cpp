// dpscope's collectives against PyTorch's: the same inputs through torch.distributed (gloo) and
// through the sim backend give the same outputs, element for element. Skips (visibly) when
// python3 (testing::python3()) has no torch.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "comm_test_util.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

// dist.all_to_all_single(output, input) without split sizes, on 3 and 4 gloo ranks
// (all_to_all_reference.py), against ProcessGroup::all_to_all_single on as many sim ranks.
TEST(AllToAllParity, EqualSplitsMatchPyTorchGloo) {
  if (!testing::torch_available())
    GTEST_SKIP() << "python3-torch not installed: all_to_all_single parity not checked";
  for (const int n : {3, 4}) {
    const int64_t block = 5;
    SCOPED_TRACE(fmt::format("n={} block={}", n, block));
    testing::TempDir dir("a2a_parity");
    const std::string script =
        std::string(DPSCOPE_SOURCE_DIR) + "/tests/runtime/comm/all_to_all_reference.py";
    const auto ref = testing::run_command(fmt::format("{} {} {} {} {}", testing::python3(), script, n, block,
                                                      (dir.path() / "rendezvous").string()));
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    std::vector<std::vector<float>> torch_out(static_cast<size_t>(n));
    std::istringstream lines(ref.output);
    std::string line;
    while (std::getline(lines, line)) {
      const size_t colon = line.find(": ");
      if (colon == std::string::npos) continue;
      const int r = std::stoi(line.substr(0, colon));
      std::istringstream values(line.substr(colon + 2));
      for (float v; values >> v;) torch_out.at(static_cast<size_t>(r)).push_back(v);
    }
    std::vector<std::vector<float>> ours(static_cast<size_t>(n));
    spawn(
        n,
        [&](ProcessGroup& pg) {
          std::vector<float> mine(static_cast<size_t>(n * block));
          for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(1000 * pg.rank() + i);
          Tensor in = Tensor::from_floats(mine, {n * block}, pg.device());
          Tensor out = Tensor::zeros({n * block}, pg.device());
          pg.all_to_all_single(out, in)->wait();
          ours[static_cast<size_t>(pg.rank())] = out.to_vector();
        },
        test::round_options());
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(torch_out[static_cast<size_t>(r)].size(), static_cast<size_t>(n * block)) << ref.output;
      EXPECT_EQ(ours[static_cast<size_t>(r)], torch_out[static_cast<size_t>(r)]) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace dpscope
