// The softmax's backward over one score tile, shared by every backward kernel of every family:
// probabilities recomputed from the forward's LSE, and the score gradients from them.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/softmax_math.h"

namespace dualkv::detail {

// In place over a score tile seen as this thread's (row, column) values (each family's
// accumulator_rows_by_columns view): S -> P = exp(scale * S - LSE), dP -> dS = P * (dP - D), with
// invisible entries (visible(row, col) false; checked only when kMasked) set to 0 in both -- a
// select, not a product, so a NaN in a masked entry never survives. kQueryMode says whether
// queries index the rows (0) or the columns (1) of the tile; LSE and D are read once per query.
template <bool kMasked, int kQueryMode, typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void softmax_backward(Scores& s, Scores& ds, const Coords& rc, const float* lse,
                                                 const float* delta, float scale_log2, const Visible& visible) {
  constexpr int kQueries = decltype(cute::size<kQueryMode>(s))::value;
  constexpr int kKeys = decltype(cute::size<1 - kQueryMode>(s))::value;
  CUTE_UNROLL
  for (int q = 0; q < kQueries; ++q) {
    const int query = cute::get<kQueryMode>(kQueryMode == 0 ? rc(q, 0) : rc(0, q));
    const float lse_log2 = lse[query] * kLog2E;
    const float query_delta = delta[query];
    CUTE_UNROLL
    for (int k = 0; k < kKeys; ++k) {
      const int row = kQueryMode == 0 ? q : k;
      const int col = kQueryMode == 0 ? k : q;
      const float prob = exp2_approx(s(row, col) * scale_log2 - lse_log2);
      const float grad = prob * (ds(row, col) - query_delta);
      if constexpr (kMasked) {
        const bool shown = visible(cute::get<0>(rc(row, col)), cute::get<1>(rc(row, col)));
        s(row, col) = shown ? prob : 0.f;
        ds(row, col) = shown ? grad : 0.f;
      } else {
        s(row, col) = prob;
        ds(row, col) = grad;
      }
    }
  }
}

// The two halves of softmax_backward, for kernels that compute the probabilities while the dP
// GEMM still runs. The per-query statistics (LSE, D) come as query_stats: either read into
// registers where the call stands (so their shared-memory loads can be issued before the waits for
// the GEMMs), or a view that reads them where they are used (fewer live registers).
template <int kQueryMode, typename Scores>
constexpr int kTileQueries = decltype(cute::size<kQueryMode>(Scores{}.layout()))::value;

template <int kQueryMode, typename Scores, typename Coords>
struct SharedQueryStats {
  const float* stats;
  const Coords& rc;
  static constexpr int size() { return kTileQueries<kQueryMode, Scores>; }
  // stats[this thread's q-th query (row if kQueryMode is 0, else column)]
  __device__ __forceinline__ float operator[](int q) const {
    return stats[cute::get<kQueryMode>(kQueryMode == 0 ? rc(q, 0) : rc(0, q))];
  }
};

template <bool kToRegisters, int kQueryMode, typename Scores, typename Coords>
__device__ __forceinline__ auto query_stats(const Coords& rc, const float* stats) {
  const SharedQueryStats<kQueryMode, Scores, Coords> view{stats, rc};
  if constexpr (kToRegisters) {
    cute::array<float, view.size()> values;
    CUTE_UNROLL
    for (int q = 0; q < view.size(); ++q) values[q] = view[q];
    return values;
  } else {
    return view;
  }
}

// S -> P = exp(scale * S - LSE) in place, unmasked, from the LSE times log2(e) per query ...
template <int kQueryMode, typename Scores, typename Stats>
__device__ __forceinline__ void softmax_probabilities(Scores& s, const Stats& lse_log2, float scale_log2) {
  constexpr int kKeys = decltype(cute::size<1 - kQueryMode>(s))::value;
  CUTE_UNROLL
  for (int q = 0; q < int(lse_log2.size()); ++q) {
    CUTE_UNROLL
    for (int k = 0; k < kKeys; ++k) {
      float& score = kQueryMode == 0 ? s(q, k) : s(k, q);
      score = exp2_approx(score * scale_log2 - lse_log2[q]);
    }
  }
}

// ... then dP -> dS = P * (dP - D) in place, once dP has landed.
template <int kQueryMode, typename Scores, typename Stats>
__device__ __forceinline__ void softmax_score_gradients(const Scores& p, Scores& ds, const Stats& delta) {
  constexpr int kKeys = decltype(cute::size<1 - kQueryMode>(p))::value;
  CUTE_UNROLL
  for (int q = 0; q < int(delta.size()); ++q) {
    CUTE_UNROLL
    for (int k = 0; k < kKeys; ++k) {
      const int row = kQueryMode == 0 ? q : k;
      const int col = kQueryMode == 0 ? k : q;
      ds(row, col) = p(row, col) * (ds(row, col) - delta[q]);
    }
  }
}

// Sets the entries of one tile that `visible` rejects to 0: kernels whose masked steps are rare
// run the unmasked math on every step and this pass only on the masked ones (a select, so a NaN
// computed in a masked entry never survives). Kernels that mask P before dP has landed call it
// per tile.
template <typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void zero_invisible(Scores& scores, const Coords& rc, const Visible& visible) {
  CUTE_UNROLL
  for (int i = 0; i < cute::size(scores); ++i) {
    scores(i) = visible(cute::get<0>(rc(i)), cute::get<1>(rc(i))) ? scores(i) : 0.f;
  }
}

// The same for P and dS together, after an unmasked softmax_backward.
template <typename Scores, typename Coords, typename Visible>
__device__ __forceinline__ void zero_invisible(Scores& s, Scores& ds, const Coords& rc, const Visible& visible) {
  zero_invisible(s, rc, visible);
  zero_invisible(ds, rc, visible);
}

}  // namespace dualkv::detail
