// The Hopper backward's fp32 dQ accumulator (atomic mode): where the KV kernel adds a query step's
// dQ block and where the convert pass reads a token's row. Plain host-device code, so the CPU
// tests check the geometry the kernels use.
//
// Layout: per query head, one slot of block_m x d floats per (segment, query tile), the tile
// starting at a multiple of block_m from its segment's start (the query steps of QueryWalk).
// Inside a slot, the block_m x d tile is two 64 x 64 warpgroup blocks (BackwardConfig's
// dq_block_first_row / _column say where each sits in the tile), and a block keeps the wgmma
// accumulator's register order: value v of thread t at float (v / 4) * 512 + 4 t + v % 4. So a
// block staged in shared memory in the same order (a warp's 16-byte stores each one contiguous
// 512 bytes, no bank conflict) is added by one contiguous bulk reduction of 16 KiB.
//
// Slot of a tile: its segment plus its first token / block_m. Distinct tiles get distinct slots
// (a later segment's tiles start at or past an earlier one's, and a segment adds 1), so a head
// has at most segments + ceil(tokens / block_m) of them: at most block_m padding rows per segment.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"

namespace dualkv::detail::sm90 {

inline constexpr int kDqBlockRows = 64;  // a warpgroup's dQ block: one wgmma M
inline constexpr int kDqBlockFloats = kDqBlockRows * 64;

// Slots per head for `tokens` tokens in `segments` segments, tiles of block_m.
DUALKV_HOST_DEVICE int64_t dq_accumulator_slots(int64_t tokens, int64_t segments, int block_m) {
  return segments + (tokens + block_m - 1) / block_m;
}

// Rows (of d floats) per head: the workspace's size and the stride between heads.
DUALKV_HOST_DEVICE int64_t dq_accumulator_rows(int64_t tokens, int64_t segments, int block_m) {
  return block_m * dq_accumulator_slots(tokens, segments, block_m);
}

// The slot of the query tile starting at `tile_begin` (a multiple of block_m from its segment's start).
DUALKV_HOST_DEVICE int64_t dq_accumulator_slot(int segment, int tile_begin, int block_m) {
  return segment + tile_begin / block_m;
}

// Float offset of warpgroup block `warpgroup` of `slot` of `head`, slots of block_m x head_dim floats.
DUALKV_HOST_DEVICE int64_t dq_block_offset(int head, int64_t head_stride, int64_t slot, int block_m, int head_dim,
                                           int warpgroup) {
  return head * head_stride + slot * (block_m * head_dim) + warpgroup * kDqBlockFloats;
}

// Float offset, inside a 64 x 64 block, of accumulator value `value` of warpgroup thread `thread`.
DUALKV_HOST_DEVICE constexpr int dq_fragment_offset(int thread, int value) {
  return value / 4 * 512 + 4 * thread + value % 4;
}

// The same offset by (row, column) of the block: the wgmma accumulator gives thread t value
// 4 j + 2 h + e at row 16 (t / 32) + (t % 32) / 4 + 8 h, column 8 j + 2 (t % 4) + e.
DUALKV_HOST_DEVICE constexpr int dq_fragment_offset_at(int row, int column) {
  const int thread = 32 * (row / 16) + 4 * (row % 8) + column % 8 / 2;
  const int value = 4 * (column / 8) + 2 * (row % 16 / 8) + column % 2;
  return dq_fragment_offset(thread, value);
}

// The segment holding `token`: the last s with cu_seqlens[s] <= token (cu_seqlens has segments + 1
// entries and token < cu_seqlens[segments]).
DUALKV_HOST_DEVICE int segment_of_token(const int32_t* cu_seqlens, int segments, int token) {
  int low = 0, high = segments;  // cu_seqlens[low] <= token < cu_seqlens[high]
  while (high - low > 1) {
    const int middle = (low + high) / 2;
    if (cu_seqlens[middle] <= token) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return low;
}

}  // namespace dualkv::detail::sm90
