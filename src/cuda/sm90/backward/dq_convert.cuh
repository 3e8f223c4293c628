// The convert pass's view of the Hopper backward's dQ accumulator (dq_accumulator.h): where the
// floats of a token's row sit in its query tile's slot.
#pragma once

#include <cstdint>

#include "cuda/sm90/backward/dq_accumulator.h"

namespace dualkv::detail::sm90 {

template <typename Config>
struct TiledDqAccumulator {
  const float* data;
  int64_t head_stride;  // floats per query head
  const int32_t* cu_seqlens;
  int segments;
  const int32_t* cu_groups;
  int groups;

  // The floats of columns [8 chunk, 8 chunk + 8) of (token, head): one row of one warpgroup block,
  // four column pairs held by four neighbouring threads (16 bytes apart).
  __device__ __forceinline__ void load(int64_t token, int head, int chunk, float (&values)[8]) const {
    constexpr int kBlockM = Config::kBlockM;
    const int row = static_cast<int>(token);
    const int run = run_of_token(cu_seqlens, segments, cu_groups, groups, row);
    const int run_begin = cu_seqlens[run];
    const int tile_begin = run_begin + (row - run_begin) / kBlockM * kBlockM;
    const int tile_row = row - tile_begin;
    const int column = 8 * chunk;
    const int warpgroup = Config::kDqWarpgroupsAlongM == 1 ? column / 64 : tile_row / 64;
    const int tile_segment = segment_of_token(cu_seqlens, segments, tile_begin);
    const float* block =
        data + dq_block_offset(head, head_stride, dq_accumulator_slot(tile_segment, tile_begin, kBlockM), kBlockM,
                               Config::kHeadDim, warpgroup);
    const int block_row = tile_row - Config::dq_block_first_row(warpgroup);
    const int block_column = column - Config::dq_block_first_column(warpgroup);
    for (int pair = 0; pair < 4; ++pair) {
      const float2 two =
          *reinterpret_cast<const float2*>(block + dq_fragment_offset_at(block_row, block_column + 2 * pair));
      values[2 * pair] = two.x;
      values[2 * pair + 1] = two.y;
    }
  }
};

}  // namespace dualkv::detail::sm90
