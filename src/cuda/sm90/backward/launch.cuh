// The launcher behind run_backward<dtype, head_dim>; included only by the instantiation units
// (compiled for sm_90a) so that each (dtype, head_dim) kernel compiles in its own translation unit.
// The pre-pass and the deterministic mode's query-major dQ kernel are the portable family's
// (memory-bound or a small share of the time; docs/decisions.md); the dQ conversion reads this
// family's tiled accumulator with its own kernel (dq_convert.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.h"
#include "cuda/common/dtype_traits.cuh"
#include "cuda/common/launch_with_shared_memory.cuh"
#include "cuda/sm80/backward/dq_kernel.cuh"
#include "cuda/sm80/backward/preprocess_kernel.cuh"
#include "cuda/sm90/backward/config.cuh"
#include "cuda/sm90/backward/deterministic_dq.h"
#include "cuda/sm90/backward/dq_convert.cuh"
#include "cuda/sm90/backward/kernel.cuh"
#include "cuda/sm90/backward/launch.h"

namespace dualkv::detail::sm90 {

template <DType kDType, int kHeadDim>
size_t backward_shared_memory_bytes() {
  return BackwardConfig<CudaElementT<kDType>, kHeadDim>::kSmemBytes;
}

template <DType kDType, int kHeadDim>
void run_backward(const BackwardTmaParams& params) {
  using Element = CudaElementT<kDType>;
  using Config = BackwardConfig<Element, kHeadDim>;
  const BackwardKernelParams& p = params.base;
  const auto stream = static_cast<cudaStream_t>(p.stream);

  const int kv_blocks = p.num_key_tiles * p.kv_heads;
  if (p.dq_accum != nullptr) {
    // The tiled accumulator, slot padding included, is zeroed whole; the pre-pass would zero
    // (H, T, d) rows.
    check_cuda(cudaMemsetAsync(p.dq_accum, 0, p.heads * params.dq_accum_head_stride * sizeof(float), stream),
               "cudaMemsetAsync (dQ accumulator)");
    BackwardKernelParams preprocess = p;
    preprocess.dq_accum = nullptr;
    sm80::launch_backward_preprocess<Element, kHeadDim>(preprocess, stream);
    launch_with_shared_memory(backward_kv_kernel<Config, true>, "sm90 backward_kv_kernel", kv_blocks, Config::kThreads,
                              Config::kSmemBytes, stream, params);
    launch_convert_tiled_dq<Element, Config>(p, params.dq_accum_head_stride, stream);
  } else {
    sm80::launch_backward_preprocess<Element, kHeadDim>(p, stream);
    launch_with_shared_memory(backward_kv_kernel<Config, false>, "sm90 backward_kv_kernel", kv_blocks, Config::kThreads,
                              Config::kSmemBytes, stream, params);
    using DqTraits =
        sm80::BackwardTraits<Element, kHeadDim, kDeterministicDqShape.key_block, kDeterministicDqShape.query_block>;
    launch_with_shared_memory(sm80::backward_dq_kernel<DqTraits>, "backward_dq_kernel", p.num_query_tiles * p.heads,
                              DqTraits::kDqThreads, sizeof(sm80::DqSharedStorage<DqTraits>), stream, p);
  }
}

}  // namespace dualkv::detail::sm90
