// cuBLAS, loaded when the first CUDA matrix product needs it rather than when dpscope starts.
//
// Why: libcublas.so pulls in libcublasLt, whose initialisers run at load time and cost about
// 100 ms of every process start, GPU or not: every `dpscope` command, every lesson run a knob
// triggers, every rank a launcher starts (docs/benchmarks.md, "Process start"). Almost all of
// those processes never touch a CUDA device. The library is opened with dlopen() on first use,
// by the soname of the cuBLAS the build compiled against; the kernel layer calls it through the
// table below, with the same types the header declares.
#pragma once

#include <cublas_v2.h>

namespace dpscope::kernels::gpu {

struct CublasLibrary {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm) sgemm;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// The loaded library, opened on the first call (thread-safe). Throws Error(kDevice) naming the
// library and dlerror()'s reason when it cannot be opened or lacks a function; the next call tries
// again.
const CublasLibrary& cublas_library();

}  // namespace dpscope::kernels::gpu
