// DPS_HOST_DEVICE marks a function that runs on the host and, compiled by nvcc, on the GPU
// (`__host__ __device__`). Kernel bodies shared by the CPU and CUDA paths use it
// (kernels/elementwise.hpp); on a host compiler it expands to nothing.
#pragma once

#if defined(__CUDACC__)
#define DPS_HOST_DEVICE __host__ __device__
#else
#define DPS_HOST_DEVICE
#endif
