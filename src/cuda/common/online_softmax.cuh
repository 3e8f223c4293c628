// Online softmax over key blocks (FlashAttention-2), for every kernel family: per query row a
// running maximum m and a running sum l of exp(s - m); O is rescaled when m grows and divided by
// l once at the end. It works on (row, column) views of register accumulators, which each family
// builds from its MMA's fragment layout (sm80/mma.cuh, sm90/common/fragments.cuh); in both, the 4
// lanes of a quad share a row, so row reductions combine across the quad with two xor-shuffles.
// Exponentials use exp2 (softmax_math.h): one FFMA and one MUFU.EX2 per score.
//
// The rescale of O is separate from the score update so that a kernel whose P V runs
// asynchronously (sm90 wgmma) can apply it after that GEMM has retired.
#pragma once

#include <cmath>
#include <cute/tensor.hpp>

#include "cuda/common/softmax_math.h"

namespace dualkv::detail {

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

// Stores this thread's row LSEs (from OnlineSoftmax::finish) at lse_rows[row] for rows < rows.
// row_coords: the (row, column) view of the accumulator's coordinates; one lane of each quad holds
// column 0 of the quad's rows, and only it writes.
template <int kRows, typename RowCoords>
__device__ __forceinline__ void store_row_lse(const RowCoords& row_coords, const float (&lse)[kRows], float* lse_rows,
                                              int rows) {
  if (cute::get<1>(row_coords(0, 0)) != 0) return;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = cute::get<0>(row_coords(r, 0));
    if (row < rows) lse_rows[row] = lse[r];
  }
}

template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];  // in raw score units; -inf until a row has seen a key
  float row_sum[kRows];  // this thread's partial sum; quad-reduced in finish()
  float rescale[kRows];  // exp(m_old - m_new) of the last update, valid when any_raised
  bool any_raised;       // whether any row of the warp raised its maximum in the last update

  __device__ __forceinline__ OnlineSoftmax() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // Turns scores (masked entries -inf) into unnormalised probabilities exp(s - m_new) in place and
  // rescales O by exp(m_old - m_new) at once (a kernel whose P V has retired by now, sm80). Over a
  // long prompt most blocks raise no maximum; the rescale is then skipped for the whole warp.
  template <typename Scores, typename Output>
  __device__ __forceinline__ void update(Scores& scores, Output& out, float scale_log2) {
    update_rows<true, false>(scores, &out, scale_log2);
  }

  // The same with a lazy reference maximum, keeping exp(m_old - m_new) for rescale_output() (a
  // kernel whose previous P V may still be running, sm90). A row's reference maximum moves only
  // when a score exceeds it by more than 2^kLazySlackLog2, so probabilities stay <= 256 (exact in
  // fp32 sums, far from the 16-bit operands' range) and O is rescaled only then: after a row's
  // first blocks, rarely. FlashAttention-4 uses the same slack.
  static constexpr float kLazySlackLog2 = 8.0f;
  template <typename Scores>
  __device__ __forceinline__ void update_lazy(Scores& scores, float scale_log2) {
    update_rows<false, true>(scores, static_cast<Scores*>(nullptr), scale_log2);
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

 private:
  // kLazy: a row's maximum moves to the block's maximum only when that exceeds it by more than
  // kLazySlackLog2 (in exp2 units); otherwise to the larger of the two (a NaN-free max: fmaxf).
  template <bool kRescaleNow, bool kLazy, typename Scores, typename Output>
  __device__ __forceinline__ void update_rows(Scores& scores, Output* out, float scale_log2) {
    static_assert(decltype(cute::size<0>(scores))::value == kRows);
    float new_max[kRows];
    float shift[kRows];  // m_new in log2 units
    bool raised = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float block_max = quad_max(chained_reduce(scores, r, [](float a, float b) { return fmaxf(a, b); }));
      if constexpr (kLazy) {
        const bool move = block_max * scale_log2 > row_max[r] * scale_log2 + kLazySlackLog2;
        new_max[r] = move ? block_max : row_max[r];
      } else {
        new_max[r] = fmaxf(row_max[r], block_max);
      }
      raised |= new_max[r] != row_max[r];
      // A row that has seen only masked keys keeps max -inf; shifting by 0 instead makes its
      // factors exp2(-inf - 0) = 0 and keeps it empty instead of producing (-inf) - (-inf) = NaN.
      shift[r] = (new_max[r] == -INFINITY ? 0.0f : new_max[r]) * scale_log2;
    }
    any_raised = __any_sync(0xffffffffu, raised);
    if (any_raised) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        rescale[r] = exp2_approx(row_max[r] * scale_log2 - shift[r]);
        row_sum[r] *= rescale[r];
      }
      if constexpr (kRescaleNow) rescale_output(*out);
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = new_max[r];
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(scores); ++c) scores(r, c) = exp2_approx(scores(r, c) * scale_log2 - shift[r]);
      row_sum[r] += chained_reduce(scores, r, [](float a, float b) { return a + b; });
    }
  }
};

}  // namespace dualkv::detail
