// The masks of a key block's scores, applied to the S = Q K^T accumulator of one warp. Which
// blocks need one, and which, is the key-block walk's answer (cuda/common/key_block_walk.h).
#pragma once

#include <cmath>
#include <cute/tensor.hpp>

namespace dualkv::detail::sm80 {

// Sets the scores of keys outside [.., range_end) and, if kCausal, of keys after the query to
// -inf. coords: the MMA partition of an identity tensor over the (query, key) block.
template <bool kCausal, typename Scores, typename Coords>
__device__ __forceinline__ void mask_scores(Scores& scores, const Coords& coords, int q_begin, int key_begin,
                                            int range_end) {
  CUTE_UNROLL
  for (int i = 0; i < cute::size(scores); ++i) {
    const int query = q_begin + cute::get<0>(coords(i));
    const int key = key_begin + cute::get<1>(coords(i));
    if (key >= range_end || (kCausal && key > query)) scores(i) = -INFINITY;
  }
}

}  // namespace dualkv::detail::sm80
