// Online softmax over key blocks (FlashAttention-2): per query row a running maximum m and a
// running sum l of exp(s - m); the output accumulator is rescaled whenever m grows, and divided
// by l once at the end. Scores stay in raw q.k units; exponentials use exp2 with the softmax
// scale pre-multiplied by log2(e), so each score costs one FFMA and one MUFU.EX2.
//
// Rows of a thread's accumulator fragment are shared by the 4 lanes of a quad (lanes 4i..4i+3),
// so row reductions combine across the quad with two xor-shuffles.
#pragma once

#include <cmath>
#include <cute/tensor.hpp>

#include "cuda/common/softmax_math.h"
#include "cuda/sm80/mma.cuh"

namespace dualkv::detail::sm80 {

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Reduces row r of a (rows, columns) fragment with `op` over kChains interleaved partial results
// combined at the end: a single chain would make every step wait for the previous one's latency
// (2 resident warps per scheduler cannot hide that), kChains chains overlap.
template <typename Matrix, typename Op>
__device__ __forceinline__ float chained_reduce(const Matrix& m, int r, Op op) {
  constexpr int kColumns = decltype(cute::size<1>(m))::value;
  constexpr int kChains = kColumns % 4 == 0 ? 4 : 1;
  float partial[kChains];
  CUTE_UNROLL
  for (int i = 0; i < kChains; ++i) partial[i] = m(r, i);
  CUTE_UNROLL
  for (int c = kChains; c < kColumns; ++c) partial[c % kChains] = op(partial[c % kChains], m(r, c));
  CUTE_UNROLL
  for (int step = kChains / 2; step > 0; step /= 2) {
    CUTE_UNROLL
    for (int i = 0; i < step; ++i) partial[i] = op(partial[i], partial[i + step]);
  }
  return partial[0];
}

template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];  // in raw score units; -inf until a row has seen a key
  float row_sum[kRows];  // this thread's partial sum; quad-reduced in finish()

  __device__ __forceinline__ OnlineSoftmax() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Turns scores (an MMA accumulator, masked entries -inf) into unnormalised probabilities
  // exp(s - m_new) in place, and rescales the output accumulator `out` by exp(m_old - m_new).
  // The rescale is skipped, for the whole warp at once, when no row of the warp raised its
  // maximum: over a long prompt most key blocks leave every maximum unchanged, and the skipped
  // factor would be exp2 of the rounding residual of m * scale_log2, i.e. 1 to within an ulp
  // (O and l share it, so it cancels anyway). A NaN maximum compares unequal and rescales.
  template <typename Scores, typename Output>
  __device__ __forceinline__ void update(Scores& scores_acc, Output& out_acc, float scale_log2) {
    auto scores = cute::make_tensor(scores_acc.data(), accumulator_rows_by_columns(scores_acc.layout()));
    auto out = cute::make_tensor(out_acc.data(), accumulator_rows_by_columns(out_acc.layout()));
    static_assert(decltype(cute::size<0>(scores))::value == kRows);
    float new_max[kRows];
    float shift[kRows];  // m_new in log2 units
    bool raised = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      new_max[r] = quad_max(fmaxf(row_max[r], chained_reduce(scores, r, [](float a, float b) { return fmaxf(a, b); })));
      raised |= !(new_max[r] == row_max[r]);
      // A row that has seen only masked keys keeps max -inf; shifting by 0 instead makes its
      // factors exp2(-inf - 0) = 0 and keeps it empty instead of producing (-inf) - (-inf) = NaN.
      shift[r] = (new_max[r] == -INFINITY ? 0.0f : new_max[r]) * scale_log2;
    }
    if (__any_sync(0xffffffffu, raised)) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const float rescale = exp2_approx(row_max[r] * scale_log2 - shift[r]);
        row_sum[r] *= rescale;
        CUTE_UNROLL
        for (int c = 0; c < cute::size<1>(out); ++c) out(r, c) *= rescale;
      }
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = new_max[r];
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(scores); ++c) scores(r, c) = exp2_approx(scores(r, c) * scale_log2 - shift[r]);
      row_sum[r] += chained_reduce(scores, r, [](float a, float b) { return a + b; });
    }
  }

  // Divides `out` by the row sums and returns, per row, the natural-log LSE m * scale + log(l).
  // NaN anywhere in a row's scores reaches l and so both O and the LSE.
  template <typename Output>
  __device__ __forceinline__ void finish(Output& out_acc, float scale, float (&lse)[kRows]) {
    auto out = cute::make_tensor(out_acc.data(), accumulator_rows_by_columns(out_acc.layout()));
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const float inverse = 1.0f / sum;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(out); ++c) out(r, c) *= inverse;
      lse[r] = (row_max[r] == -INFINITY ? 0.0f : row_max[r]) * scale + logf(sum);
    }
  }
};

}  // namespace dualkv::detail::sm80
