// The (query tile, query head) steps whose queries see one key tile, in the order both families'
// key-tile-major backward kernels walk them (host-device, so the CPU tests check it).
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "host/backward_plan.h"

namespace dualkv::detail {

// Query tiles are laid on runs, not segments: a group's prompt is one run and its responses, which
// are contiguous, are another. A prompt key tile is seen by every row of the response run, so its
// walk there takes full tiles across response boundaries; with ragged responses, tiles laid per
// response would leave a partial tile at every response's end (5% of the backward's steps at the
// step benchmark's shape; docs/decisions.md, "Work order, tiles and memory").
//
// One (query tile, query head) step of a key tile's walk.
struct QueryStep {
  int run;         // first segment of the run holding the tile
  int begin;       // first row of the tile: the run's first token plus a multiple of the block
  int rows_begin;  // first query of the walk in the tile; past `begin` only where a response key
                   // tile's walk starts in a tile that the previous response shares
  int rows_end;    // end of the walk's queries in the run: rows at or past it are not the walk's
  int head;
  bool causal;  // the queries are in the key tile's own segment
};

// The walk visits every query tile for one query head, then starts over for the next head of the
// KV head's group. Key tile t starts at query tile t * kN / kM, so with heads outermost the
// resident CTAs of one KV head work on different query rows of one head (fewer of them reduce
// into the same dQ rows at once) and stay closer together than with heads innermost; measured
// 0.6-1.6% faster on an H200 with the sm80 kernel. Orders that pack the resident CTAs tighter
// still were slower (docs/performance.md, "Tried and dropped").
//
// A prompt key tile is seen by the prompt's query tiles from its own on (causal) and by the whole
// response run of its group; a response key tile by its own response's queries from its own on.
struct QueryWalk {
  QueryStep first;      // the first step of every head's pass
  int responses_begin;  // a prompt key tile's second leg: the group's response run; empty for a
  int responses_end;    // response key tile
  int end_head;
  int block;

  // The walk of key tile `tile` of KV head `kv_head` in query tiles of `block` rows.
  DUALKV_HOST_DEVICE static QueryWalk of_key_tile(const int32_t* cu_seqlens, const TileWork& tile, int kv_head,
                                                  int heads_per_kv_head, int block) {
    const bool prompt = tile.segment == tile.prompt_segment;
    const int run = prompt ? tile.segment : tile.prompt_segment + 1;
    const int run_begin = cu_seqlens[run];
    const int begin = run_begin + (tile.begin - run_begin) / block * block;
    const int segment_begin = cu_seqlens[tile.segment];
    const QueryStep first{run,
                          begin,
                          begin > segment_begin ? begin : segment_begin,
                          cu_seqlens[tile.segment + 1],
                          kv_head * heads_per_kv_head,
                          true};
    const int responses_begin = cu_seqlens[tile.prompt_segment + 1];
    const int responses_end = prompt ? cu_seqlens[tile.group_end_segment] : responses_begin;
    return QueryWalk{first, responses_begin, responses_end, (kv_head + 1) * heads_per_kv_head, block};
  }

  DUALKV_HOST_DEVICE bool done(const QueryStep& step) const { return step.head >= end_head; }

  DUALKV_HOST_DEVICE void advance(QueryStep& step) const {
    step.begin += block;
    step.rows_begin = step.begin;
    if (step.begin < step.rows_end) return;
    if (step.causal && responses_begin < responses_end) {
      step = QueryStep{first.run + 1, responses_begin, responses_begin, responses_end, step.head, false};
      return;
    }
    const int head = step.head + 1;
    step = first;
    step.head = head;
  }
};

}  // namespace dualkv::detail
