// The launcher behind launch_sm80_forward<dtype, head_dim, block_m, block_n>; included only by the
// instantiation units so that each (dtype, tile shape) kernel compiles in its own translation unit.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/dtype_traits.cuh"
#include "cuda/common/launch_with_shared_memory.cuh"
#include "cuda/sm80/forward/forward_config.cuh"
#include "cuda/sm80/forward/forward_kernel.cuh"
#include "cuda/sm80/forward/forward_launch.h"

namespace dualkv::detail {

template <DType kDType, int kHeadDim, int kBlockM, int kBlockN>
void launch_sm80_forward(const ForwardKernelParams& params, int32_t work_items, cudaStream_t stream) {
  using Config = sm80::ForwardConfig<CudaElementT<kDType>, kHeadDim, kBlockM, kBlockN>;
  launch_with_shared_memory(sm80::forward_kernel<Config>, "sm80 forward kernel", work_items, Config::kThreads,
                            Config::kSmemBytes, stream, params);
}

}  // namespace dualkv::detail
