// Backward row passes, and the launchers both families' backwards run them with. Pre-pass:
// D = rowsum(dO * O) per (query, head) in fp32, the forward's LSE times log2(e) in D's layout when
// the kernel asks for it (lse_log2: its exp2 then needs no multiply per query), and zeroing of the
// fp32 dQ accumulator (the portable family's layout) when dQ is accumulated with atomics.
// Post-pass (atomic mode, this family's (H, T, d) accumulator): dq_accum times dq_accum_scale
// converted into dq. The Hopper family converts its tiled accumulator with its own kernel
// (sm90/backward/dq_convert.cuh), which reuses this file's row blocking.
//
// Warp roles: none; each group of kHeadDim / 8 consecutive threads owns one (token, head) row,
// 8 elements (16 bytes) per thread, reduced with shuffles. No shared memory, no pipeline.
#pragma once

#include <cuda_runtime_api.h>
#include <cutlass/array.h>
#include <cutlass/numeric_types.h>

#include <cstdint>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/softmax_math.h"

namespace dualkv::detail::sm80 {

template <typename Element, int kHeadDim>
struct RowChunks {
  static constexpr int kPerRow = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kThreads = 256;
  static constexpr int kRowsPerBlock = kThreads / kPerRow;
};

template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(256) backward_preprocess_kernel(const BackwardKernelParams p) {
  using Chunks = RowChunks<Element, kHeadDim>;
  using Vector = cutlass::Array<Element, 8>;
  const int64_t row = int64_t{blockIdx.x} * Chunks::kRowsPerBlock + threadIdx.x / Chunks::kPerRow;
  const int chunk = threadIdx.x % Chunks::kPerRow;
  // Threads past the last row still join the shuffles (full-warp masks) but touch no memory.
  const bool active = row < int64_t{p.tokens} * p.heads;
  const int64_t token = active ? row / p.heads : 0;
  const int head = active ? static_cast<int>(row % p.heads) : 0;

  float sum = 0.f;
  if (active) {
    const auto* dout =
        static_cast<const Element*>(p.dout.data) + token * p.dout.token_stride + head * p.dout.head_stride + chunk * 8;
    const auto* out =
        static_cast<const Element*>(p.out.data) + token * p.out.token_stride + head * p.out.head_stride + chunk * 8;
    const Vector dout_chunk = *reinterpret_cast<const Vector*>(dout);
    const Vector out_chunk = *reinterpret_cast<const Vector*>(out);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < 8; ++i) {
      sum += static_cast<float>(dout_chunk[i]) * static_cast<float>(out_chunk[i]);
    }
  }
  CUTLASS_PRAGMA_UNROLL
  for (int offset = Chunks::kPerRow / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  }
  if (!active) return;
  if (chunk == 0) {
    p.delta[head * p.stats_row_stride + token] = sum;
    if (p.lse_log2 != nullptr) {
      p.lse_log2[head * p.stats_row_stride + token] = p.lse[head * p.lse_head_stride + token] * kLog2E;
    }
  }
  if (p.dq_accum != nullptr) {
    auto* accum = reinterpret_cast<float4*>(p.dq_accum + (head * int64_t{p.tokens} + token) * kHeadDim + chunk * 8);
    accum[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    accum[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Columns [column, column + 8) of dq's (token, head) row: `values` times dq_accum_scale in dq's
// dtype, one 16-byte store.
template <typename Element>
__device__ __forceinline__ void store_dq_chunk(const BackwardKernelParams& p, int64_t token, int head, int column,
                                               const float (&values)[8]) {
  cutlass::Array<Element, 8> converted;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < 8; ++i) converted[i] = static_cast<Element>(values[i] * p.dq_accum_scale);
  auto* dq = static_cast<Element*>(p.dq.data) + token * p.dq.token_stride + head * p.dq.head_stride + column;
  *reinterpret_cast<cutlass::Array<Element, 8>*>(dq) = converted;
}

// Post-pass of the atomic mode: dq = dq_accum * dq_accum_scale in dq's dtype and strides, from
// the (H, T, d) fp32 rows of the accumulator.
template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(256) backward_dq_convert_kernel(const BackwardKernelParams p) {
  using Chunks = RowChunks<Element, kHeadDim>;
  const int64_t row = int64_t{blockIdx.x} * Chunks::kRowsPerBlock + threadIdx.x / Chunks::kPerRow;
  const int chunk = threadIdx.x % Chunks::kPerRow;
  if (row >= int64_t{p.tokens} * p.heads) return;
  const int64_t token = row / p.heads;
  const int head = static_cast<int>(row % p.heads);
  const auto* accumulated =
      reinterpret_cast<const float4*>(p.dq_accum + (head * int64_t{p.tokens} + token) * kHeadDim + chunk * 8);
  const float4 low = accumulated[0];
  const float4 high = accumulated[1];
  const float values[8] = {low.x, low.y, low.z, low.w, high.x, high.y, high.z, high.w};
  store_dq_chunk<Element>(p, token, head, chunk * 8, values);
}

// The two row passes as the backward launchers of both families run them, on `stream`.
template <typename Element, int kHeadDim>
int backward_row_blocks(const BackwardKernelParams& p) {
  using Chunks = RowChunks<Element, kHeadDim>;
  const int64_t rows = int64_t{p.tokens} * p.heads;
  return static_cast<int>((rows + Chunks::kRowsPerBlock - 1) / Chunks::kRowsPerBlock);
}

template <typename Element, int kHeadDim>
void launch_backward_preprocess(const BackwardKernelParams& p, cudaStream_t stream) {
  backward_preprocess_kernel<Element, kHeadDim>
      <<<backward_row_blocks<Element, kHeadDim>(p), RowChunks<Element, kHeadDim>::kThreads, 0, stream>>>(p);
  check_launch("backward_preprocess_kernel");
}

template <typename Element, int kHeadDim>
void launch_backward_dq_convert(const BackwardKernelParams& p, cudaStream_t stream) {
  backward_dq_convert_kernel<Element, kHeadDim>
      <<<backward_row_blocks<Element, kHeadDim>(p), RowChunks<Element, kHeadDim>::kThreads, 0, stream>>>(p);
  check_launch("backward_dq_convert_kernel");
}

}  // namespace dualkv::detail::sm80
