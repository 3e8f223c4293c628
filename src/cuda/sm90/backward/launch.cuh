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
#include "cuda/sm90/backward/split_d_config.cuh"
#include "cuda/sm90/backward/split_d_kernel.cuh"

namespace dualkv::detail::sm90 {

// The configuration and KV kernel of head_dim's tile shape: consumer warpgroups splitting the key
// tile (kernel.cuh) or the head dimension (split_d_kernel.cuh).
template <DType kDType, int kHeadDim>
struct BackwardKernelOf {
  static constexpr bool kSplitDim = find_backward_tile_shape(kHeadDim)->split == BackwardSplit::kHeadDim;
  using Element = CudaElementT<kDType>;
  using Config =
      std::conditional_t<kSplitDim, SplitDimBackwardConfig<Element, kHeadDim>, BackwardConfig<Element, kHeadDim>>;
  template <bool kAccumulateDq>
  static constexpr auto kernel() {
    if constexpr (kSplitDim) {
      return backward_split_dim_kernel<Config, kAccumulateDq>;
    } else {
      return backward_kv_kernel<Config, kAccumulateDq>;
    }
  }
};

template <DType kDType, int kHeadDim>
size_t backward_shared_memory_bytes() {
  return BackwardKernelOf<kDType, kHeadDim>::Config::kSmemBytes;
}

template <DType kDType, int kHeadDim>
void run_backward(const BackwardTmaParams& params) {
  using Kernels = BackwardKernelOf<kDType, kHeadDim>;
  using Element = typename Kernels::Element;
  using Config = typename Kernels::Config;
  const BackwardKernelParams& p = params.base;
  const auto stream = static_cast<cudaStream_t>(p.stream);

  const int kv_blocks = p.num_key_tiles * p.kv_heads;
  if constexpr (Config::kWalkLeadRows > 0) {
    check_cuda(cudaMemsetAsync(p.walk_progress, 0, kv_blocks * sizeof(uint64_t), stream),
               "cudaMemsetAsync (walk progress)");
  }
  if (p.dq_accum != nullptr) {
    // The tiled accumulator, slot padding included, is zeroed whole; the pre-pass would zero
    // (H, T, d) rows.
    check_cuda(cudaMemsetAsync(p.dq_accum, 0, p.heads * params.dq_accum_head_stride * sizeof(float), stream),
               "cudaMemsetAsync (dQ accumulator)");
    BackwardKernelParams preprocess = p;
    preprocess.dq_accum = nullptr;
    sm80::launch_backward_preprocess<Element, kHeadDim>(preprocess, stream);
    launch_with_shared_memory(Kernels::template kernel<true>(), "sm90 backward KV kernel", kv_blocks, Config::kThreads,
                              Config::kSmemBytes, stream, params);
    launch_convert_tiled_dq<Element, Config>(p, params.dq_accum_head_stride, stream);
  } else {
    sm80::launch_backward_preprocess<Element, kHeadDim>(p, stream);
    launch_with_shared_memory(Kernels::template kernel<false>(), "sm90 backward KV kernel", kv_blocks, Config::kThreads,
                              Config::kSmemBytes, stream, params);
    constexpr sm80::BackwardTileShape kDqShape = *deterministic_dq_shape(kHeadDim);
    using DqTraits = sm80::BackwardTraits<Element, kHeadDim, kDqShape.key_block, kDqShape.query_block>;
    launch_with_shared_memory(sm80::backward_dq_kernel<DqTraits>, "backward_dq_kernel", p.num_query_tiles * p.heads,
                              DqTraits::kDqThreads, sizeof(sm80::DqSharedStorage<DqTraits>), stream, p);
  }
}

}  // namespace dualkv::detail::sm90
