// Architecture-neutral work plan of the CUDA backward pass (plain C++, so a CPU test can check
// it); the tile sizes come from the kernel family's tile shape (e.g. sm80/backward/tile_shapes.h).
//
// The backward runs two kinds of tiles over the packed layout (layout.h):
//   key tiles   (KV-major kernel): kKeyBlock keys of one segment. The kernel walks every query
//               tile that sees them (cuda/common/query_walk.h) and owns their dK/dV outright.
//   query tiles (deterministic dQ kernel): kQueryBlock queries of one segment with their key
//               ranges, the forward's plan (host/query_plan.h). The kernel walks every key block
//               they see and owns their dQ outright.
// Key tiles never cross a segment boundary and start at multiples of the block from the
// segment's first token. The key tile list is ordered heaviest first (longest-processing-time
// order), so the long tiles of shared segments (prompts) start before the short tiles of leaves
// (responses) fill the tail of the grid. A segment's key tiles are one unit, weighed by its
// heaviest tile and kept together (heaviest first inside): they read the same query rows and add
// into the same dQ rows, which then stay in L2 while they run. Ordered tile by tile instead, a
// response's tiles stepped 1.5x slower, a tree's backward ran 15% slower and that of four two-level
// groups 29% slower (docs/decisions.md, "Work order, tiles and memory").
//
// Runs: the query tiles a key tile's walk visits lie on runs of consecutive segments, each tiled
// from its own first token, so a walk across several segments takes full tiles across their
// boundaries (two-level layouts: a group's prompt is one run, its responses together another).
// A run ends wherever some segment's descendants begin or end, and at every root: so every run
// is either wholly a descendant of a segment or wholly not, and a walk's leg over a segment's
// descendants is whole runs, with no row of a tile outside them but rows past a run's end.
// A key tile's walk is a list in the run table: first the run holding its segment (its own
// queries, causally, from the key tile's query tile on), then the runs of its descendants, then
// an empty entry that ends it (the kernels' walk then needs no count: cuda/common/query_walk.h).
// The leaves of one run share one list. Every other segment has a list of its own, as long as
// its descendants have runs: the plan is linear in the walks' steps, not in the tokens (a chain
// 16 deep holds 16 runs and a list for each of its segments).
//
// Device plan (backward_plan_image, cached with the layout: host/plan_cache.h):
//   cu_seqlens  int32 (S + 1): the layout's segment offsets, for the kernels' query/key ranges
//   key tiles   TileWork[]
//   query tiles QueryTile[] and their KeyRange[], empty unless the dQ kernel runs (deterministic)
//   cu_runs     int32 (R + 1): the runs' first segments, for the Hopper dQ accumulator's
//               (sm90/backward/dq_accumulator.h) convert pass
//   run table   QueryRun[]: the walks' lists
// Device workspace of one call (one allocation, every region 16-byte aligned):
//   dq_accum   fp32 (H, T, d), contiguous; only when dQ is accumulated with atomics
//   delta      fp32 (H, T') rows of stats_row_stride = T rounded up to 4 floats, so each head's row
//              starts 16-byte aligned: D = rowsum(dO * O), the softmax-gradient correction per query
//   lse_log2   fp32 (H, T') likewise; only for the Hopper kernel, which bulk-copies D and the
//              forward's LSE times log2(e) (16-byte aligned rows, whatever the caller's LSE
//              strides are; pre-multiplied so its exp2 needs no multiply per query)
//   walk_progress  uint64 per KV-kernel CTA; only for Hopper kernels that pace their walks
//              (sm90/backward/walk_pacing.h)
// The lse_log2 region ends with kStatsReadSlack floats: the Hopper kernel copies block_m + 4
// floats from the 16-byte aligned start at or before a query tile's first row, which may run past
// a region's last row (past delta's, into lse_log2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dualkv/layout.h"
#include "host/plan_cache.h"
#include "host/query_plan.h"

namespace dualkv::detail {

// One key tile; 16 bytes so a kernel reads it with one vector load.
struct TileWork {
  int32_t begin;      // first token of the tile
  int32_t segment;    // segment holding the tile
  int32_t run_begin;  // the tile's walk: entries [run_begin, run_end) of the run table, the first
  int32_t run_end;    // the run holding `segment`, the others its descendants' runs; entry
                      // run_end is empty (begin == end), the walk's end
};
static_assert(sizeof(TileWork) == 16, "TileWork is read as one int4 on the device");

// One run of consecutive segments whose query tiles lie back to back; 16 bytes, one vector load.
struct QueryRun {
  int32_t first_segment;
  int32_t end_segment;  // one past its last segment
  int32_t begin;        // its first token
  int32_t end;          // one past its last token
};
static_assert(sizeof(QueryRun) == 16, "QueryRun is read as one int4 on the device");

// Entries [begin, end) of the run table.
struct RunInterval {
  int32_t begin;
  int32_t end;
};

struct BackwardRuns {
  std::vector<int32_t> cu_runs;    // R + 1 segment indices: run r is segments [cu_runs[r], cu_runs[r + 1])
  std::vector<QueryRun> table;     // the walks' lists, each ended by an empty entry
  std::vector<RunInterval> walks;  // per segment: its key tiles' walk, the ending entry excluded
};

BackwardRuns plan_runs(const Layout& layout);

// Query rows a key tile's dK/dV gather: its segment's queries from its own (segment-aligned)
// query tile on, plus every query of its descendants.
int64_t key_tile_query_rows(const Layout& layout, const BackwardRuns& runs, const TileWork& tile, int query_block);

// Key tiles of `key_block` tokens over every segment, in units (a leaf's tiles together) heaviest
// first by key_tile_query_rows (stable).
std::vector<TileWork> plan_key_tiles(const Layout& layout, const BackwardRuns& runs, int key_block, int query_block);

// sum over segments of ceil(length / block): the length of either tile list.
int64_t count_tiles(const Layout& layout, int block);

// The regions of backward_plan_image, in order.
enum BackwardPlanRegion : size_t {
  kCuSeqlensRegion,
  kKeyTilesRegion,
  kQueryTilesRegion,
  kQueryKeyRangesRegion,
  kCuRunsRegion,
  kRunTableRegion
};

// The device plan of a backward with key tiles of key_block tokens walked in query steps of
// query_block, and query tiles of dq_query_block tokens (0: no dQ kernel, no query tiles).
PlanImage backward_plan_image(const Layout& layout, int key_block, int query_block, int dq_query_block);

inline constexpr int64_t kStatsReadSlack = 132;

struct BackwardWorkspace {
  size_t dq_accum_offset = 0;  // meaningful only if has_dq_accum
  size_t delta_offset = 0;
  size_t lse_log2_offset = 0;       // meaningful only if has_lse_log2
  size_t walk_progress_offset = 0;  // meaningful only if walk_progress_slots > 0
  int64_t walk_progress_slots = 0;
  int64_t stats_row_stride = 0;  // floats from one head's delta (and lse_log2) row to the next
  bool has_dq_accum = false;
  bool has_lse_log2 = false;
  size_t total_bytes = 0;
};

// Region offsets for `tokens` tokens of `heads` query heads of `head_dim`, with a dQ accumulator
// (unless deterministic) of dq_accum_rows rows of head_dim floats per head: the portable family
// keeps one row per token, the Hopper family adds padding rows (sm90/backward/dq_accumulator.h);
// and walk_progress_slots progress slots (0: none).
BackwardWorkspace plan_backward_workspace(int64_t tokens, int64_t dq_accum_rows, int64_t heads, int64_t head_dim,
                                          bool deterministic, bool stores_lse_log2, int64_t walk_progress_slots);

}  // namespace dualkv::detail
