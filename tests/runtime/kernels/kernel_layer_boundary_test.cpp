// The kernel layer owns the math: the layers above it (nn, optim, comm, parallel) call kernels/
// and include no BLAS and no element-wise body of their own. A source scan keeps it that way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

TEST(KernelLayerBoundary, LayersAboveKernelsCallNoBlasAndDefineNoKernelBodies) {
  const std::filesystem::path src = std::filesystem::path(DPSCOPE_SOURCE_DIR) / "runtime" / "src";
  int files = 0;
  for (const char* layer : {"nn", "optim", "comm", "parallel"}) {
    for (const auto& entry : std::filesystem::directory_iterator(src / layer)) {
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string body = text.str();
      const std::string name = entry.path().lexically_relative(src).string();
      ++files;
      for (const char* forbidden : {"cblas", "round_to_fp16", "std::exp("})
        EXPECT_EQ(body.find(forbidden), std::string::npos)
            << name << " uses " << forbidden << ": move it to kernels/";
    }
  }
  EXPECT_GT(files, 20);  // the scan saw the layers' sources
}

}  // namespace
