// The (query tile, query head) steps whose queries see one key tile, in the order both families'
// key-tile-major backward kernels walk them (host-device, so the CPU tests check it).
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "host/backward_plan.h"

namespace dualkv::detail {

// Query tiles are laid on runs, not segments (host/backward_plan.h): a run is consecutive
// segments (two-level layouts: a group's prompt is one run and its responses, which are
// contiguous, are another). A key tile with descendants is seen by every row of their runs, so
// its walk there takes full tiles across segment boundaries; with ragged responses, tiles laid
// per response would leave a partial tile at every response's end (5% of the backward's steps at
// the step benchmark's shape; docs/decisions.md, "Work order, tiles and memory").
//
// One (query tile, query head) step of a key tile's walk.
struct QueryStep {
  int run;         // the run holding the tile: its entry in the plan's run table
  int begin;       // first row of the tile: the run's first token plus a multiple of the block
  int rows_begin;  // first query of the walk in the tile; past `begin` only where a key tile's
                   // causal walk starts in a tile that an earlier segment of its run shares
  int rows_end;    // end of the walk's queries in the run: rows at or past it are not the walk's
  int head;
  int causal;  // 1: the queries are in the key tile's own segment (an int: ptxas keeps the step's
               // ints in uniform registers; as a bool it went to local memory in the Hopper
               // kernel's head_dim 64 deterministic variant)
};

// The walk visits every query tile for one query head, then starts over for the next head of the
// KV head's group. Key tile t starts at query tile t * kN / kM, so with heads outermost the
// resident CTAs of one KV head work on different query rows of one head (fewer of them reduce
// into the same dQ rows at once) and stay closer together than with heads innermost; measured
// 0.6-1.6% faster on an H200 with the sm80 kernel. Orders that pack the resident CTAs tighter
// still were slower (docs/performance.md, "Tried and dropped").
//
// A key tile is seen by its own segment's query tiles from its own on (causal), then by every row
// of its descendants' runs (whole runs: no row of them outside its descendants but past a run's
// end). The walk's runs are the table entries [tile.run_begin, tile.run_end), its own run first,
// and entry run_end is an empty one that ends the walk (host/backward_plan.h), so the walk holds
// no count: the Hopper kernel's head_dim 64 consumers are at the edge of their registers, and one
// more value kept across their step loop went to local memory.
struct QueryWalk {
  QueryStep first;  // the first step of every head's pass
  const QueryRun* runs;
  int end_head;
  int block;

  // The walk of key tile `tile` of KV head `kv_head` in query tiles of `block` rows.
  DUALKV_HOST_DEVICE static QueryWalk of_key_tile(const int32_t* cu_seqlens, const QueryRun* runs, const TileWork& tile,
                                                  int kv_head, int heads_per_kv_head, int block) {
    const int run_begin = runs[tile.run_begin].begin;
    const int begin = run_begin + (tile.begin - run_begin) / block * block;
    const int segment_begin = cu_seqlens[tile.segment];
    const QueryStep first{tile.run_begin,
                          begin,
                          begin > segment_begin ? begin : segment_begin,
                          cu_seqlens[tile.segment + 1],
                          kv_head * heads_per_kv_head,
                          1};
    return QueryWalk{first, runs, (kv_head + 1) * heads_per_kv_head, block};
  }

  DUALKV_HOST_DEVICE bool done(const QueryStep& step) const { return step.head >= end_head; }

  DUALKV_HOST_DEVICE void advance(QueryStep& step) const {
    step.begin += block;
    step.rows_begin = step.begin;
    if (step.begin < step.rows_end) return;
    const int next = step.run + 1;
    const QueryRun run = runs[next];
    if (run.begin < run.end) {
      step = QueryStep{next, run.begin, run.begin, run.end, step.head, 0};
      return;
    }
    const int head = step.head + 1;
    step = first;
    step.head = head;
  }
};

}  // namespace dualkv::detail
