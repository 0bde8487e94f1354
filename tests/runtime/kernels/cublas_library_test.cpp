// cuBLAS opened on first use (runtime/src/kernels/cuda/cublas_library.hpp): every function the
// kernel layer calls resolves, and a status reads back by name, with no GPU needed. CUDA builds only.
#include <gtest/gtest.h>

#ifdef DPSCOPE_TEST_CUBLAS_LIBRARY

#include <string>

#include "cublas_library.hpp"

namespace dpscope::kernels::gpu {
namespace {

TEST(CublasLibrary, OpensOnFirstUseWithEveryFunction) {
  const CublasLibrary& lib = cublas_library();
  EXPECT_NE(lib.create, nullptr);
  EXPECT_NE(lib.destroy, nullptr);
  EXPECT_NE(lib.set_stream, nullptr);
  EXPECT_NE(lib.set_math_mode, nullptr);
  EXPECT_NE(lib.sgemm, nullptr);
  EXPECT_EQ(std::string(lib.status_name(CUBLAS_STATUS_NOT_INITIALIZED)), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_FALSE(std::string(lib.status_string(CUBLAS_STATUS_NOT_INITIALIZED)).empty());
  EXPECT_EQ(&cublas_library(), &lib);  // opened once
}

}  // namespace
}  // namespace dpscope::kernels::gpu

#endif
