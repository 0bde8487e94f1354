// cuBLAS loaded on first use (cublas_library.hpp).
#include "cublas_library.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "dpscope/base/error.hpp"

namespace dpscope::kernels::gpu {

namespace {

// The symbol a cublas_v2.h name stands for (cublasCreate is a macro for cublasCreate_v2).
#define DPS_CUBLAS_SYMBOL_TEXT(name) #name
#define DPS_CUBLAS_SYMBOL(name) DPS_CUBLAS_SYMBOL_TEXT(name)

// The soname the build linked against, e.g. "libcublas.so.13".
const std::string& soname() {
  static const std::string name = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  return name;
}

// The library by soname (the executable's run path, LD_LIBRARY_PATH, the loader's cache), else
// from the directory libcudart was loaded from: cuBLAS ships in the same toolkit folder.
void* open_library(std::string& why) {
  if (void* handle = dlopen(soname().c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  why = dlerror();
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 || info.dli_fname == nullptr)
    return nullptr;
  const std::string cudart = info.dli_fname;
  const size_t slash = cudart.rfind('/');
  if (slash == std::string::npos) return nullptr;
  const std::string beside = cudart.substr(0, slash + 1) + soname();
  if (void* handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  why += fmt::format("; {}", dlerror());
  return nullptr;
}

template <typename Fn>
void resolve(void* handle, const char* symbol, Fn& fn) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr)
    throw Error(ErrorKind::kDevice, fmt::format("{} has no {}: the cuBLAS found is not the one dpscope was "
                                                "built with ({}.x)",
                                                soname(), symbol, CUBLAS_VER_MAJOR));
  fn = reinterpret_cast<Fn>(address);
}

}  // namespace

const CublasLibrary& cublas_library() {
  static std::mutex mutex;
  static CublasLibrary library{};
  static bool loaded = false;
  const std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return library;
  std::string why;
  void* handle = open_library(why);
  if (handle == nullptr)
    throw Error(ErrorKind::kDevice,
                fmt::format("cannot load cuBLAS ({}) for a CUDA matrix product: {}", soname(), why));
  CublasLibrary l{};
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasCreate), l.create);
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasDestroy), l.destroy);
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasSetStream), l.set_stream);
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasSetMathMode), l.set_math_mode);
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasSgemm), l.sgemm);
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasGetStatusName), l.status_name);
  resolve(handle, DPS_CUBLAS_SYMBOL(cublasGetStatusString), l.status_string);
  library = l;  // the handle stays open for the life of the process
  loaded = true;
  return library;
}

}  // namespace dpscope::kernels::gpu
