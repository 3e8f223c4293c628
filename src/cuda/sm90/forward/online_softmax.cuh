// Online softmax over key blocks on (row, column) views of register accumulators: per query row
// a running maximum m and a running sum l of exp(s - m); O is rescaled when m grows and divided by
// l once at the end. Scores stay in raw q.k units; exponentials use exp2 with the softmax scale
// pre-multiplied by log2(e), so each score costs one FFMA and one MUFU.EX2. The 4 lanes of a quad
// share a row (fragments.cuh), so row reductions combine across the quad with two xor-shuffles.
//
// The rescale of O is separate from the score update so that a kernel can run it after the
// P V wgmma of the previous block has retired (it writes the accumulator that wgmma reads).
#pragma once

#include <cmath>
#include <cute/tensor.hpp>

namespace dualkv::detail::sm90 {

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Reduces row r of a (rows, columns) view with `op` over four interleaved partial chains: one
// chain would serialise every step on the previous one's latency.
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
  float rescale[kRows];  // exp(m_old - m_new) of the last update, for rescale_output()
  bool any_raised;       // whether any row of the warp raised its maximum in the last update

  __device__ __forceinline__ OnlineSoftmax() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Turns scores (masked entries -inf) into unnormalised probabilities exp(s - m_new) in place
  // and keeps exp(m_old - m_new) for rescale_output(). Over a long prompt most blocks raise no
  // maximum; the rescale is then skipped for the whole warp (its factor would be 1 to an ulp, and
  // O and l share it). A NaN maximum compares unequal and rescales.
  template <typename Scores>
  __device__ __forceinline__ void update(Scores& scores, float scale_log2) {
    static_assert(decltype(cute::size<0>(scores))::value == kRows);
    float shift[kRows];  // m_new in log2 units
    bool raised = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float new_max =
          quad_max(fmaxf(row_max[r], chained_reduce(scores, r, [](float a, float b) { return fmaxf(a, b); })));
      raised |= !(new_max == row_max[r]);
      // A row that has seen only masked keys keeps max -inf; shifting by 0 instead makes its
      // factors exp2(-inf - 0) = 0 and keeps it empty instead of producing (-inf) - (-inf) = NaN.
      shift[r] = (new_max == -INFINITY ? 0.0f : new_max) * scale_log2;
      rescale[r] = exp2_approx(row_max[r] * scale_log2 - shift[r]);
      row_max[r] = new_max;
    }
    any_raised = __any_sync(0xffffffffu, raised);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      if (any_raised) row_sum[r] *= rescale[r];
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(scores); ++c) scores(r, c) = exp2_approx(scores(r, c) * scale_log2 - shift[r]);
      row_sum[r] += chained_reduce(scores, r, [](float a, float b) { return a + b; });
    }
  }

  // O *= exp(m_old - m_new) per row, as decided by the last update().
  template <typename Output>
  __device__ __forceinline__ void rescale_output(Output& out) const {
    if (!any_raised) return;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(out); ++c) out(r, c) *= rescale[r];
    }
  }

  // Divides `out` by the row sums and returns, per row, the natural-log LSE m * scale + log(l).
  // NaN anywhere in a row's scores reaches l and so both O and the LSE.
  template <typename Output>
  __device__ __forceinline__ void finish(Output& out, float scale, float (&lse)[kRows]) {
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

}  // namespace dualkv::detail::sm90
