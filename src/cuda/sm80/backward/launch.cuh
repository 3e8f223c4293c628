// Host-side launch sequence of the sm80 backward (included by the instantiation units only).
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/dtype_traits.cuh"
#include "cuda/common/launch_with_shared_memory.cuh"
#include "cuda/sm80/backward/dq_kernel.cuh"
#include "cuda/sm80/backward/kv_kernel.cuh"
#include "cuda/sm80/backward/launch.h"
#include "cuda/sm80/backward/preprocess_kernel.cuh"

namespace dualkv::detail::sm80 {

template <DType kDType, int kHeadDim, int kKeyBlock, int kQueryBlock>
void run_backward(const BackwardKernelParams& params) {
  using Element = CudaElementT<kDType>;
  using Traits = BackwardTraits<Element, kHeadDim, kKeyBlock, kQueryBlock>;
  static_assert(sizeof(KvSharedStorage<Traits>) == backward_kv_shared_memory_bytes(Traits::kShape),
                "tile_shapes.h and the KV kernel disagree on shared memory");
  static_assert(sizeof(DqSharedStorage<Traits>) == backward_dq_shared_memory_bytes(Traits::kShape),
                "tile_shapes.h and the dQ kernel disagree on shared memory");
  auto stream = static_cast<cudaStream_t>(params.stream);
  const bool accumulate_dq = params.dq_accum != nullptr;

  launch_backward_preprocess<Element, kHeadDim>(params, stream);

  const int kv_blocks = params.num_key_tiles * params.kv_heads;
  if (accumulate_dq) {
    launch_with_shared_memory(backward_kv_kernel<Traits, true>, "backward_kv_kernel", kv_blocks, Traits::kKvThreads,
                              sizeof(KvSharedStorage<Traits>), stream, params);
    launch_backward_dq_convert<Element, kHeadDim>(params, stream);
  } else {
    launch_with_shared_memory(backward_kv_kernel<Traits, false>, "backward_kv_kernel", kv_blocks, Traits::kKvThreads,
                              sizeof(KvSharedStorage<Traits>), stream, params);
    launch_with_shared_memory(backward_dq_kernel<Traits>, "backward_dq_kernel", params.num_query_tiles * params.heads,
                              Traits::kDqThreads, sizeof(DqSharedStorage<Traits>), stream, params);
  }
}

}  // namespace dualkv::detail::sm80
