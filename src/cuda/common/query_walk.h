// The (query tile, query head) steps whose queries see one key tile, in the order both families'
// key-tile-major backward kernels walk them (host-device, so the CPU tests check it).
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "host/backward_plan.h"

namespace dualkv::detail {

// One (query tile, query head) step of a key tile's walk. Segments of a group are contiguous, so
// moving to the next segment starts where the previous one ended.
struct QueryStep {
  int segment;
  int begin;        // first query of the tile
  int segment_end;  // end of the tile's segment: rows at or past it are not queries of the tile
  int head;
};

// The walk visits every query tile for one query head, then starts over for the next head of the
// KV head's group. Key tile t starts at query tile t * kN / kM, so with heads outermost the
// resident CTAs of one KV head work on different query rows of one head (fewer of them reduce
// into the same dQ rows at once) and stay closer together than with heads innermost; measured
// 0.6-1.6% faster on an H200 with the sm80 kernel. Orders that pack the resident CTAs tighter
// still were slower (docs/perf_backward_notes.md).
//
// A prompt key tile is seen by the prompt's query tiles from its own on and by every response of
// the group; a response key tile by its own response's query tiles from its own on.
struct QueryWalk {
  const int32_t* cu_seqlens;
  int end_segment;  // one past the last segment walked
  int end_head;
  QueryStep first;  // the first step of every head's pass
  int block;

  // The walk of key tile `tile` of KV head `kv_head` in query tiles of `block` rows.
  DUALKV_HOST_DEVICE static QueryWalk of_key_tile(const int32_t* cu_seqlens, const TileWork& tile, int kv_head,
                                                  int heads_per_kv_head, int block) {
    const int segment_begin = cu_seqlens[tile.segment];
    const QueryStep first{tile.segment, segment_begin + (tile.begin - segment_begin) / block * block,
                          cu_seqlens[tile.segment + 1], kv_head * heads_per_kv_head};
    const int end_segment = tile.segment == tile.prompt_segment ? tile.group_end_segment : tile.segment + 1;
    return QueryWalk{cu_seqlens, end_segment, (kv_head + 1) * heads_per_kv_head, first, block};
  }

  DUALKV_HOST_DEVICE bool done(const QueryStep& step) const { return step.head >= end_head; }

  DUALKV_HOST_DEVICE void advance(QueryStep& step) const {
    step.begin += block;
    if (step.begin < step.segment_end) return;
    ++step.segment;
    step.begin = step.segment_end;
    if (step.segment < end_segment) {
      step.segment_end = cu_seqlens[step.segment + 1];
      return;
    }
    step = QueryStep{first.segment, first.begin, first.segment_end, step.head + 1};
  }
};

}  // namespace dualkv::detail
