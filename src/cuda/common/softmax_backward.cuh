// The softmax's backward over one score tile, shared by every backward kernel of every family:
// probabilities recomputed from the forward's LSE, and the score gradients from them. Two passes,
// so a kernel can compute P while the dP GEMM still runs (the sm90 kernel does).
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/softmax_math.h"

namespace dualkv::detail {

// The tiles are this thread's (row, column) values (each family's accumulator_rows_by_columns
// view). kQueryMode says whether queries index the rows (0) or the columns (1); per-query values
// are read once per query. Invisible entries (visible(row, col) false; checked only when kMasked)
// are set to 0 -- a select, not a product, so a NaN in a masked entry never survives.

// In place: S -> P = exp(scale * S - LSE).
template <bool kMasked, int kQueryMode, typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void softmax_probabilities(Scores& s, const Coords& rc, const float* lse, float scale_log2,
                                                      const Visible& visible) {
  constexpr int kQueries = decltype(cute::size<kQueryMode>(s))::value;
  constexpr int kKeys = decltype(cute::size<1 - kQueryMode>(s))::value;
  CUTE_UNROLL
  for (int q = 0; q < kQueries; ++q) {
    const int query = cute::get<kQueryMode>(kQueryMode == 0 ? rc(q, 0) : rc(0, q));
    const float lse_log2 = lse[query] * kLog2E;
    CUTE_UNROLL
    for (int k = 0; k < kKeys; ++k) {
      const int row = kQueryMode == 0 ? q : k;
      const int col = kQueryMode == 0 ? k : q;
      const float prob = exp2_approx(s(row, col) * scale_log2 - lse_log2);
      if constexpr (kMasked) {
        s(row, col) = visible(cute::get<0>(rc(row, col)), cute::get<1>(rc(row, col))) ? prob : 0.f;
      } else {
        s(row, col) = prob;
      }
    }
  }
}

// In place, with P from softmax_probabilities: dP -> dS = P * (dP - D).
template <bool kMasked, int kQueryMode, typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void softmax_score_gradients(const Scores& p, Scores& ds, const Coords& rc,
                                                        const float* delta, const Visible& visible) {
  constexpr int kQueries = decltype(cute::size<kQueryMode>(p))::value;
  constexpr int kKeys = decltype(cute::size<1 - kQueryMode>(p))::value;
  CUTE_UNROLL
  for (int q = 0; q < kQueries; ++q) {
    const int query = cute::get<kQueryMode>(kQueryMode == 0 ? rc(q, 0) : rc(0, q));
    const float query_delta = delta[query];
    CUTE_UNROLL
    for (int k = 0; k < kKeys; ++k) {
      const int row = kQueryMode == 0 ? q : k;
      const int col = kQueryMode == 0 ? k : q;
      const float grad = p(row, col) * (ds(row, col) - query_delta);
      if constexpr (kMasked) {
        ds(row, col) = visible(cute::get<0>(rc(row, col)), cute::get<1>(rc(row, col))) ? grad : 0.f;
      } else {
        ds(row, col) = grad;
      }
    }
  }
}

// Both passes: S -> P, dP -> dS.
template <bool kMasked, int kQueryMode, typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void softmax_backward(Scores& s, Scores& ds, const Coords& rc, const float* lse,
                                                 const float* delta, float scale_log2, const Visible& visible) {
  softmax_probabilities<kMasked, kQueryMode>(s, rc, lse, scale_log2, visible);
  softmax_score_gradients<kMasked, kQueryMode>(s, ds, rc, delta, visible);
}

}  // namespace dualkv::detail
