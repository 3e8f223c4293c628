// The key blocks one query tile visits, in order: first the prompt range in blocks of kBlockN
// keys (no causal mask: every prompt key precedes every response query), then the tile's own
// segment from self_begin up to its last row (causal). Only the last, partial prompt block needs
// a bounds mask, and only own-segment blocks that reach past the tile's first row need the
// causal mask; every other block runs unmasked.
#pragma once

#include <cmath>
#include <cute/tensor.hpp>

#include "host/work_plan.h"

namespace dualkv::detail::sm80 {

enum class BlockMask { kNone, kBounds, kCausal };

template <int kBlockN>
struct KeyBlocks {
  int prompt_begin, prompt_end, self_begin, self_end;
  int prompt_blocks;           // ceil(prompt keys / kBlockN)
  int unmasked_prompt_blocks;  // full prompt blocks
  int unmasked_self_blocks;    // own-segment blocks whose last key <= the tile's first query
  int total;

  __device__ __forceinline__ explicit KeyBlocks(const ForwardTile& tile)
      : prompt_begin(tile.prompt_begin),
        prompt_end(tile.prompt_end),
        self_begin(tile.self_begin),
        self_end(tile.q_end) {
    const int prompt_keys = prompt_end - prompt_begin;
    prompt_blocks = (prompt_keys + kBlockN - 1) / kBlockN;
    unmasked_prompt_blocks = prompt_keys / kBlockN;
    unmasked_self_blocks = (tile.q_begin + 1 - self_begin) / kBlockN;
    total = prompt_blocks + (self_end - self_begin + kBlockN - 1) / kBlockN;
  }

  __device__ __forceinline__ bool in_prompt(int block) const { return block < prompt_blocks; }
  __device__ __forceinline__ int key_begin(int block) const {
    return in_prompt(block) ? prompt_begin + block * kBlockN : self_begin + (block - prompt_blocks) * kBlockN;
  }
  // One past the last key of the block's range (prompt or own segment), which may fall inside it.
  __device__ __forceinline__ int range_end(int block) const { return in_prompt(block) ? prompt_end : self_end; }
  __device__ __forceinline__ BlockMask mask(int block) const {
    if (in_prompt(block)) return block < unmasked_prompt_blocks ? BlockMask::kNone : BlockMask::kBounds;
    return block - prompt_blocks < unmasked_self_blocks ? BlockMask::kNone : BlockMask::kCausal;
  }
};

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
