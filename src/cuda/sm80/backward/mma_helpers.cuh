// Register-fragment helpers for SM80 mma.sync (m16n8k16) through CuTe: shared->register GEMMs
// with the next k-slice's ldmatrix issued before the current slice's MMAs, and the reshaping of an
// fp32 accumulator into the A operand of the next GEMM.
#pragma once

#include <cutlass/numeric_conversion.h>

#include <cute/tensor.hpp>

#include "cuda/sm80/backward/kernel_traits.cuh"

namespace dualkv::sm80 {

using namespace cute;

// acc += A * B with both operands in shared memory. tAsA / tBsB are the copy partitions of
// the shared tiles; tArA / tBrB the MMA fragments (whose copy views are retiled here).
template <typename TiledMma, typename Acc, typename FragA, typename FragB, typename SmemA, typename SmemB,
          typename CopyA, typename CopyB>
__device__ __forceinline__ void gemm_smem_smem(const TiledMma& mma, Acc& acc, FragA& tArA, FragB& tBrB,
                                               const SmemA& tAsA, const SmemB& tBsB, const CopyA& copy_a,
                                               const CopyB& copy_b) {
  auto a_view = copy_a.get_thread_slice(threadIdx.x).retile_D(tArA);
  auto b_view = copy_b.get_thread_slice(threadIdx.x).retile_D(tBrB);
  constexpr int kSlices = decltype(size<2>(tArA))::value;
  copy(copy_a, tAsA(_, _, _0{}), a_view(_, _, _0{}));
  copy(copy_b, tBsB(_, _, _0{}), b_view(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < kSlices; ++k) {
    if (k + 1 < kSlices) {
      copy(copy_a, tAsA(_, _, k + 1), a_view(_, _, k + 1));
      copy(copy_b, tBsB(_, _, k + 1), b_view(_, _, k + 1));
    }
    cute::gemm(mma, tArA(_, _, k), tBrB(_, _, k), acc);
  }
}

// acc += A * B with A already in registers (an earlier GEMM's converted accumulator).
template <typename TiledMma, typename Acc, typename FragA, typename FragB, typename SmemB, typename CopyB>
__device__ __forceinline__ void gemm_reg_smem(const TiledMma& mma, Acc& acc, const FragA& tArA, FragB& tBrB,
                                              const SmemB& tBsB, const CopyB& copy_b) {
  auto b_view = copy_b.get_thread_slice(threadIdx.x).retile_D(tBrB);
  constexpr int kSlices = decltype(size<2>(tArA))::value;
  copy(copy_b, tBsB(_, _, _0{}), b_view(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < kSlices; ++k) {
    if (k + 1 < kSlices) copy(copy_b, tBsB(_, _, k + 1), b_view(_, _, k + 1));
    cute::gemm(mma, tArA(_, _, k), tBrB(_, _, k), acc);
  }
}

// An m16n8k16 accumulator fragment ((2,2), MMA_M, MMA_N) covers, per thread, two rows and two
// adjacent columns of each 16x8 block. Two column-adjacent blocks (n, n+1) hold exactly the values
// an A fragment of one 16x16 k-slice needs, in the same order, so the A view is a regrouping:
// ((2,2), MMA_M, (2, MMA_N/2)) -> ((2,2,2), MMA_M, MMA_N/2).
template <typename AccLayout>
__device__ __forceinline__ auto accumulator_as_a_operand(AccLayout acc) {
  static_assert(decltype(size<0>(acc))::value == 4, "m16n8 accumulator");
  static_assert(decltype(size<2>(acc))::value % 2 == 0, "k-slices are 16 columns");
  auto split = logical_divide(acc, Shape<Underscore, Underscore, _2>{});
  return make_layout(make_layout(get<0>(split), get<2, 0>(split)), get<1>(split), get<2, 1>(split));
}

// The same accumulator as a (rows, columns) matrix: ((2,2), MMA_M, MMA_N) ->
// ((2, MMA_M), (2, MMA_N)); the first value pair of each block is two adjacent columns, the second
// pair the same columns 8 rows down.
template <typename AccLayout>
__device__ __forceinline__ auto accumulator_rows_cols(AccLayout acc) {
  static_assert(decltype(size<0>(acc))::value == 4, "m16n8 accumulator");
  auto split = logical_divide(acc, Shape<_2>{});  // ((2, 2), MMA_M, MMA_N)
  return make_layout(make_layout(get<0, 1>(split), get<1>(split)), make_layout(get<0, 0>(split), get<2>(split)));
}

// 2^x on the special-function unit, flushing subnormal results to zero: the softmax needs no
// subnormal probabilities, and the IEEE-exact exp2f costs a compare and two multiplies more.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// In place over a score tile: S -> P = exp(scale * S - LSE), dP -> dS = P * (dP - D), with
// invisible entries (visible(row, col) false; checked only when kMasked) set to 0 in both.
// kQueryMode says whether queries index the rows (0) or the columns (1) of the tile; LSE and D
// are read once per query.
template <bool kMasked, int kQueryMode, typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void softmax_backward(Scores& scores, Scores& dscores, const Coords& coords,
                                                 const float* lse, const float* delta, float scale_log2,
                                                 const Visible& visible) {
  Tensor s = make_tensor(scores.data(), accumulator_rows_cols(scores.layout()));
  Tensor ds = make_tensor(dscores.data(), accumulator_rows_cols(dscores.layout()));
  Tensor rc = make_tensor(coords.data(), accumulator_rows_cols(coords.layout()));
  constexpr int kQueries = decltype(size<kQueryMode>(s))::value;
  constexpr int kKeys = decltype(size<1 - kQueryMode>(s))::value;
  CUTE_UNROLL
  for (int q = 0; q < kQueries; ++q) {
    const int query = get<kQueryMode>(kQueryMode == 0 ? rc(q, 0) : rc(0, q));
    const float lse_log2 = lse[query] * kLog2e;
    const float query_delta = delta[query];
    CUTE_UNROLL
    for (int k = 0; k < kKeys; ++k) {
      const int row = kQueryMode == 0 ? q : k;
      const int col = kQueryMode == 0 ? k : q;
      const float prob = exp2_approx(s(row, col) * scale_log2 - lse_log2);
      const float grad = prob * (ds(row, col) - query_delta);
      if constexpr (kMasked) {
        const bool shown = visible(get<0>(rc(row, col)), get<1>(rc(row, col)));
        s(row, col) = shown ? prob : 0.f;
        ds(row, col) = shown ? grad : 0.f;
      } else {
        s(row, col) = prob;
        ds(row, col) = grad;
      }
    }
  }
}

// Element-wise conversion of a register fragment (fp32 accumulators to 16-bit operands).
template <typename To, typename Fragment>
__device__ __forceinline__ auto convert_fragment(const Fragment& source) {
  using From = typename Fragment::value_type;
  constexpr int kCount = decltype(size(source))::value;
  cutlass::NumericArrayConverter<To, From, kCount> convert;
  auto converted = make_tensor<To>(source.layout());
  *reinterpret_cast<cutlass::Array<To, kCount>*>(converted.data()) =
      convert(*reinterpret_cast<const cutlass::Array<From, kCount>*>(source.data()));
  return converted;
}

}  // namespace dualkv::sm80
