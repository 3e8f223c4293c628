// The Hopper backward's fp32 dQ accumulator (atomic mode): where the KV kernel adds a query step's
// dQ block and where the convert pass reads a token's row. Plain host-device code, so the CPU
// tests check the geometry the kernels use.
//
// Layout: per query head, slots of block_m x d floats, one per query tile a step adds into: tiles
// start at a multiple of block_m from their run's start (the query steps of QueryWalk; two-level
// layouts: a group's prompt is one run, its responses together another). Inside a slot, the block_m x d tile is two
// 64 x 64 warpgroup blocks (BackwardConfig's dq_block_first_row / _column say where each sits in
// the tile), and a block keeps the wgmma accumulator's register order: value v of thread t at
// float (v / 4) * 512 + 4 t + v % 4. So a block staged in shared memory in the same order (a
// warp's 16-byte stores each one contiguous 512 bytes, no bank conflict) is added by one
// contiguous bulk reduction of 16 KiB.
//
// A step adds whole blocks, rows outside its queries included, and those rows may hold NaN (0 x K
// for a NaN key of another response). So each slot row is read back for one token only, the one
// whose contributions it collects, and a tile shared by several responses has several slots:
//   - the tile's slot, named (segment holding its first token, tile): the steps of key tiles whose
//     descendants' runs include the tile's (every row of the tile in the run sees their keys:
//     runs are wholly inside or wholly outside a segment's descendants), and the causal steps of
//     that first segment;
//   - per later segment s starting inside the tile, the slot named (s, tile): the causal steps of
//     s's key tiles there;
//   - the first segment's tail slot, when a later segment of its run starts inside the tile: its
//     key tiles' causal steps there, whose rows past its end are the later segment's (one tail
//     slot per segment, after the named ones).
// The name (segment, tile) is segment + tile_begin / block_m. Names are distinct over every pair
// of a tile and a segment holding some of its rows (a later tile starts at least block_m further
// and its first segment is at or after the earlier tile's last), so a head has at most segments +
// ceil(tokens / block_m) named slots, then `segments` tail slots: at most 2 block_m rows per
// segment beyond the tokens. At equal-length layouts the tile slots are the addresses of the
// per-segment tiles that came before (naming a tile by its run's first segment instead, every
// response run's slots contiguous, moved about 10% more DRAM bytes at the same cycles at (28, 16K)
// on an H200). No step zeroes rows of its block: a dQ warp that zeroed foreign rows of the staged
// block raced with the warpgroup's staging in compute-sanitizer's racecheck, which does not follow
// the arrive/sync pairs that order them.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/common/query_walk.h"

namespace dualkv::detail::sm90 {

inline constexpr int kDqBlockRows = 64;  // a warpgroup's dQ block: one wgmma M
inline constexpr int kDqBlockFloats = kDqBlockRows * 64;

// The first tail slot (segment 0's) for `tokens` tokens in `segments` segments, tiles of block_m:
// the named slots come before.
DUALKV_HOST_DEVICE int64_t dq_tail_slots_begin(int64_t tokens, int64_t segments, int block_m) {
  return segments + (tokens + block_m - 1) / block_m;
}

// Slots per head: the named ones, then a tail slot per segment.
DUALKV_HOST_DEVICE int64_t dq_accumulator_slots(int64_t tokens, int64_t segments, int block_m) {
  return dq_tail_slots_begin(tokens, segments, block_m) + segments;
}

// Rows (of d floats) per head: the workspace's size and the stride between heads.
DUALKV_HOST_DEVICE int64_t dq_accumulator_rows(int64_t tokens, int64_t segments, int block_m) {
  return block_m * dq_accumulator_slots(tokens, segments, block_m);
}

// The slot named (segment, tile) for the query tile starting at `tile_begin` (a multiple of block_m
// from the start of its run), `segment` holding some of its rows.
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

// The segments [begin, end) of the run holding segment `segment` (cu_runs: the plan's R + 1 run
// offsets in segments, host/backward_plan.h).
struct SegmentRange {
  int begin, end;
};
DUALKV_HOST_DEVICE SegmentRange run_of_segment(const int32_t* cu_runs, int runs, int segment) {
  const int run = last_at_or_below(cu_runs, runs, segment);
  return SegmentRange{cu_runs[run], cu_runs[run + 1]};
}

// Whether the causal steps of `segment` (tokens [segment_begin, segment_end), its run's segments
// end at run_end_segment) on the tile at `tile_begin` add into the segment's tail slot: the
// segment starts the tile and a later segment of its run starts inside it.
DUALKV_HOST_DEVICE bool adds_into_tail_slot(int segment, int segment_begin, int segment_end, int run_end_segment,
                                            int tile_begin, int block_m) {
  return segment_begin <= tile_begin && segment_end < tile_begin + block_m && segment + 1 < run_end_segment;
}

// The slot a step of key tile `key_tile`'s walk adds its dQ block into (runs: the plan's run
// table). A step across a descendant's run takes its tile's slot (`tile_segments` finds the
// segment holding the tile's first token); a causal step's rows are all its key tile's
// segment's, whose slot on the tile it takes.
DUALKV_HOST_DEVICE int64_t dq_step_slot(const QueryStep& step, const TileWork& key_tile, const QueryRun* runs,
                                        SegmentCursor& tile_segments, int64_t tail_slots_begin, int block_m) {
  const QueryRun run = runs[step.run];
  if (!step.causal) return dq_accumulator_slot(tile_segments.at(step.begin, run.first_segment), step.begin, block_m);
  const int segment = key_tile.segment;
  // rows_begin is the later of the tile's and the segment's first token, rows_end the segment's end.
  return adds_into_tail_slot(segment, step.rows_begin, step.rows_end, run.end_segment, step.begin, block_m)
             ? tail_slots_begin + segment
             : dq_accumulator_slot(segment, step.begin, block_m);
}

// Where the convert pass reads a token's dQ: its segment, its query tile (first token, and one
// past its last token in the run), the tile's slot, and the slot its own segment's key tiles add
// into there when that is another one (else -1).
struct DqRowSlots {
  int segment;
  int tile_begin;
  int tile_end;
  int64_t tile_slot;
  int64_t own_slot;
};
DUALKV_HOST_DEVICE DqRowSlots dq_row_slots(const int32_t* cu_seqlens, int segments, const int32_t* cu_runs, int runs,
                                           int token, int64_t tail_slots_begin, int block_m) {
  const int segment = segment_of_token(cu_seqlens, segments, token);
  const SegmentRange run = run_of_segment(cu_runs, runs, segment);
  const int run_begin = cu_seqlens[run.begin];
  const int tile_begin = run_begin + (token - run_begin) / block_m * block_m;
  const int segment_begin = cu_seqlens[segment];
  const int tile_segment = segment_begin <= tile_begin ? segment : segment_of_token(cu_seqlens, segments, tile_begin);
  const int run_end = cu_seqlens[run.end];
  const int tile_end = tile_begin + block_m < run_end ? tile_begin + block_m : run_end;
  const int64_t tile_slot = dq_accumulator_slot(tile_segment, tile_begin, block_m);
  if (tile_segment != segment) {
    return {segment, tile_begin, tile_end, tile_slot, dq_accumulator_slot(segment, tile_begin, block_m)};
  }
  if (adds_into_tail_slot(segment, segment_begin, cu_seqlens[segment + 1], run.end, tile_begin, block_m)) {
    return {segment, tile_begin, tile_end, tile_slot, tail_slots_begin + segment};
  }
  return {segment, tile_begin, tile_end, tile_slot, -1};
}

// dq_row_slots(later).own_slot for a later token of the same tile (later < slots.tile_end), from
// the earlier token's slots: the same segment's slot, or, for a segment starting after the
// earlier token (so not the tile's first), its slot named (segment, tile).
DUALKV_HOST_DEVICE int64_t dq_own_slot_of_later_row(const int32_t* cu_seqlens, const DqRowSlots& slots, int later,
                                                    int block_m) {
  int segment = slots.segment;
  while (later >= cu_seqlens[segment + 1]) ++segment;
  return segment == slots.segment ? slots.own_slot : dq_accumulator_slot(segment, slots.tile_begin, block_m);
}

}  // namespace dualkv::detail::sm90
