// The Hopper backward's fp32 dQ accumulator (atomic mode): where the KV kernel adds a query step's
// dQ block and where the convert pass reads a token's row. Plain host-device code, so the CPU
// tests check the geometry the kernels use.
//
// Layout: per query head, one slot of block_m x d floats per (run, query tile), the tile starting
// at a multiple of block_m from its run's start (the query steps of QueryWalk: a group's prompt is
// one run, its responses together another). Inside a slot, the block_m x d tile is two 64 x 64
// warpgroup blocks (BackwardConfig's dq_block_first_row / _column say where each sits in the
// tile), and a block keeps the wgmma accumulator's register order: value v of thread t at float
// (v / 4) * 512 + 4 t + v % 4. So a block staged in shared memory in the same order (a warp's
// 16-byte stores each one contiguous 512 bytes, no bank conflict) is added by one contiguous bulk
// reduction of 16 KiB.
//
// Slot of a tile: the segment holding its first token plus that token / block_m. Distinct tiles get
// distinct slots (a later tile starts at least block_m further and in the same or a later
// segment), so a head has at most segments + ceil(tokens / block_m) of them: at most block_m
// padding rows per segment. At equal-length layouts these are the addresses of the per-segment
// tiles that came before (naming a tile by its run's first segment instead, every response run's
// slots contiguous, moved about 10% more DRAM bytes at the same cycles at (28, 16K) on an H200:
// docs/perf.md, "Hopper backward, session 28").
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

// The slot of the query tile starting at `tile_begin` (a multiple of block_m from the start of its
// run) in segment `segment`.
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

// The last i in [0, count) with offsets[i] <= value (offsets ascending, offsets[0] <= value <
// offsets[count]).
DUALKV_HOST_DEVICE int last_at_or_below(const int32_t* offsets, int count, int value) {
  int low = 0, high = count;  // offsets[low] <= value < offsets[high]
  while (high - low > 1) {
    const int middle = (low + high) / 2;
    if (offsets[middle] <= value) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return low;
}

// The segment holding `token` (cu_seqlens has segments + 1 entries and token < cu_seqlens[segments]).
DUALKV_HOST_DEVICE int segment_of_token(const int32_t* cu_seqlens, int segments, int token) {
  return last_at_or_below(cu_seqlens, segments, token);
}

// The segment holding each of an ascending series of tokens, found by stepping forward from the
// last one's (a key tile's walk: its steps' first tokens ascend within a run, and start over at a
// run's first segment for the next leg or head).
struct SegmentCursor {
  const int32_t* cu_seqlens;
  int segment = 0;
  int begin = INT32_MAX;  // the segment's tokens [begin, end); none before the first search
  int end = 0;

  // The segment holding `token`, which lies in the run whose first segment is `run`.
  DUALKV_HOST_DEVICE int at(int token, int run) {
    if (token < begin || segment < run) {
      segment = run;
      begin = cu_seqlens[run];
      end = cu_seqlens[run + 1];
    }
    while (token >= end) {
      ++segment;
      begin = end;
      end = cu_seqlens[segment + 1];
    }
    return segment;
  }
};

// The run holding `token`, by its first segment: the token's segment if that is a prompt, else
// its group's first response (cu_groups: the layout's G + 1 group offsets in segments).
DUALKV_HOST_DEVICE int run_of_token(const int32_t* cu_seqlens, int segments, const int32_t* cu_groups, int groups,
                                    int token) {
  const int segment = segment_of_token(cu_seqlens, segments, token);
  const int prompt = cu_groups[last_at_or_below(cu_groups, groups, segment)];
  return segment == prompt ? prompt : prompt + 1;
}

}  // namespace dualkv::detail::sm90
