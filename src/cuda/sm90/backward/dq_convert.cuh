// The convert pass's view of the Hopper backward's dQ accumulator (dq_accumulator.h): where the
// floats of a token's row sit in the slots that collect it.
#pragma once

#include <cstdint>

#include "cuda/sm90/backward/dq_accumulator.h"

namespace dualkv::detail::sm90 {

template <typename Config>
struct TiledDqAccumulator {
  const float* data;
  int64_t head_stride;       // floats per query head
  int64_t tail_slots_begin;  // dq_tail_slots_begin
  const int32_t* cu_seqlens;
  int segments;
  const int32_t* cu_groups;
  int groups;

  // The floats of columns [8 chunk, 8 chunk + 8) of (token, head): the sum of the token's slots
  // (its tile's, and its own segment's where that is another), each one row of one warpgroup
  // block, four column pairs held by four neighbouring threads (16 bytes apart).
  __device__ __forceinline__ void load(int64_t token, int head, int chunk, float (&values)[8]) const {
    constexpr int kBlockM = Config::kBlockM;
    const DqRowSlots slots =
        dq_row_slots(cu_seqlens, segments, cu_groups, groups, static_cast<int>(token), tail_slots_begin, kBlockM);
    const int tile_row = static_cast<int>(token) - slots.tile_begin;
    const int column = 8 * chunk;
    const int warpgroup = Config::kDqWarpgroupsAlongM == 1 ? column / 64 : tile_row / 64;
    const int block_row = tile_row - Config::dq_block_first_row(warpgroup);
    const int block_column = column - Config::dq_block_first_column(warpgroup);
    read(slots.tile_slot, head, warpgroup, block_row, block_column, values, false);
    if (slots.own_slot >= 0) read(slots.own_slot, head, warpgroup, block_row, block_column, values, true);
  }

 private:
  __device__ __forceinline__ void read(int64_t slot, int head, int warpgroup, int block_row, int block_column,
                                       float (&values)[8], bool add) const {
    const float* block = data + dq_block_offset(head, head_stride, slot, Config::kBlockM, Config::kHeadDim, warpgroup);
    for (int pair = 0; pair < 4; ++pair) {
      const float2 two =
          *reinterpret_cast<const float2*>(block + dq_fragment_offset_at(block_row, block_column + 2 * pair));
      values[2 * pair] = add ? values[2 * pair] + two.x : two.x;
      values[2 * pair + 1] = add ? values[2 * pair + 1] + two.y : two.y;
    }
  }
};

}  // namespace dualkv::detail::sm90
