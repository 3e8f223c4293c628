// DUALKV_HOST_DEVICE marks index code that kernels run and CPU tests check: __host__ __device__
// under nvcc, a plain inline function under a host compiler.
#pragma once

#if defined(__CUDACC__)
#define DUALKV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DUALKV_HOST_DEVICE inline
#endif
