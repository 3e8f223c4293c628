// The launcher behind launch_forward<dtype, head_dim>; included only by the instantiation units
// (compiled for sm_90a) so that each (dtype, head_dim) kernel compiles in its own translation unit.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/dtype_traits.cuh"
#include "cuda/common/launch_with_shared_memory.cuh"
#include "cuda/sm90/forward/config.cuh"
#include "cuda/sm90/forward/kernel.cuh"
#include "cuda/sm90/forward/launch.h"

namespace dualkv::detail::sm90 {

template <DType kDType, int kHeadDim>
size_t forward_shared_memory_bytes() {
  return ForwardConfig<CudaElementT<kDType>, kHeadDim>::kSmemBytes;
}

template <DType kDType, int kHeadDim>
void launch_forward(const ForwardKernelParams& params, int ctas, cudaStream_t stream) {
  using Config = ForwardConfig<CudaElementT<kDType>, kHeadDim>;
  launch_with_shared_memory(forward_kernel<Config>, "sm90 forward kernel", ctas, Config::kThreads, Config::kSmemBytes,
                            stream, params);
}

}  // namespace dualkv::detail::sm90
