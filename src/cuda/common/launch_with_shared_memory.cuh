// One launch of a kernel that takes its parameters by value and `shared_bytes` of dynamic shared
// memory: above 48 KiB a kernel must opt in (per device, hence every call); no blocks, no launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/common/cuda_check.h"

namespace dualkv::detail {

template <typename Kernel, typename Params>
void launch_with_shared_memory(Kernel kernel, const char* name, int blocks, int threads, size_t shared_bytes,
                               cudaStream_t stream, const Params& params) {
  if (blocks == 0) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
             name);
  kernel<<<blocks, threads, shared_bytes, stream>>>(params);
  check_launch(name);
}

}  // namespace dualkv::detail
