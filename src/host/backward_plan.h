// Architecture-neutral work plan of the CUDA backward pass (plain C++, so a CPU test can check
// it); the tile sizes come from the kernel family's tile shape (e.g. sm80/backward/tile_shapes.h).
//
// The backward runs two kinds of tiles over the packed layout (layout.h):
//   key tiles   (KV-major kernel): kKeyBlock keys of one segment. The kernel walks every query
//               tile that sees them and owns their dK/dV outright.
//   query tiles (deterministic dQ kernel): kQueryBlock queries of one segment. The kernel walks
//               every key tile they see and owns their dQ outright.
// Tiles never cross a segment boundary and start at multiples of the block from the segment's
// first token, so query and key tiles of one segment line up. Both lists are ordered heaviest
// first (longest-processing-time order), so the long prompt tiles start before the short
// response tiles fill the tail of the grid. In the key tile list a response's tiles are one unit,
// weighed by its heaviest tile and kept together (heaviest first inside): they read the same
// query rows and add into the same dQ rows, which then stay in L2 while they run. Ordered tile by
// tile instead, the kernel's last phase (response tiles only) ran 1.5x slower per step
// (docs/decisions.md, "Work order, tiles and memory").
//
// Device plan (backward_plan_image, cached with the layout: host/plan_cache.h):
//   cu_seqlens int32 (S + 1): the layout's segment offsets, for the kernels' query/key ranges
//   key tiles  TileWork[]
//   query tiles TileWork[], empty unless the dQ kernel runs (deterministic mode)
//   cu_groups  int32 (G + 1): the layout's group offsets in segments, for the runs of the Hopper
//              dQ accumulator (sm90/backward/dq_accumulator.h)
// Device workspace of one call (one allocation, every region 16-byte aligned):
//   dq_accum   fp32 (H, T, d), contiguous; only when dQ is accumulated with atomics
//   delta      fp32 (H, T') rows of stats_row_stride = T rounded up to 4 floats, so each head's row
//              starts 16-byte aligned: D = rowsum(dO * O), the softmax-gradient correction per query
//   lse_log2   fp32 (H, T') likewise; only for the Hopper kernel, which bulk-copies D and the
//              forward's LSE times log2(e) (16-byte aligned rows, whatever the caller's LSE
//              strides are; pre-multiplied so its exp2 needs no multiply per query)
// The lse_log2 region ends with kStatsReadSlack floats: the Hopper kernel copies block_m + 4
// floats from the 16-byte aligned start at or before a query tile's first row, which may run past
// a region's last row (past delta's, into lse_log2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dualkv/layout.h"
#include "host/plan_cache.h"

namespace dualkv::detail {

// One tile of one segment; 16 bytes so a kernel reads it with one vector load.
struct TileWork {
  int32_t begin;              // first token of the tile
  int32_t segment;            // segment holding the tile
  int32_t prompt_segment;     // the group's prompt segment
  int32_t group_end_segment;  // one past the group's last segment
};
static_assert(sizeof(TileWork) == 16, "TileWork is read as one int4 on the device");

// Query rows a key tile's dK/dV gather: for a prompt key tile, the prompt's queries from the
// key tile's own query tile on plus every response of the group; for a response key tile, that
// response's queries from its own query tile on.
int64_t key_tile_query_rows(const Layout& layout, const TileWork& tile, int query_block);

// Keys a query tile's dQ gathers: a prompt tile sees the prompt up to its last query; a response
// tile sees the whole prompt plus its response up to its last query.
int64_t query_tile_key_rows(const Layout& layout, const TileWork& tile, int query_block);

// Tiles of `block` tokens over every segment, heaviest first by key_tile_query_rows (stable).
std::vector<TileWork> plan_key_tiles(const Layout& layout, int key_block, int query_block);
// Tiles of `block` tokens over every segment, heaviest first by query_tile_key_rows (stable).
std::vector<TileWork> plan_query_tiles(const Layout& layout, int query_block);

// sum over segments of ceil(length / block): the length of either list.
int64_t count_tiles(const Layout& layout, int block);

// The regions of backward_plan_image, in order.
enum BackwardPlanRegion : size_t { kCuSeqlensRegion, kKeyTilesRegion, kQueryTilesRegion, kCuGroupsRegion };

// The device plan of a backward with key tiles of key_block tokens walked in query steps of
// query_block, and query tiles of dq_query_block tokens (0: no dQ kernel, no query tiles).
PlanImage backward_plan_image(const Layout& layout, int key_block, int query_block, int dq_query_block);

inline constexpr int64_t kStatsReadSlack = 132;

struct BackwardWorkspace {
  size_t dq_accum_offset = 0;  // meaningful only if has_dq_accum
  size_t delta_offset = 0;
  size_t lse_log2_offset = 0;    // meaningful only if has_lse_log2
  int64_t stats_row_stride = 0;  // floats from one head's delta (and lse_log2) row to the next
  bool has_dq_accum = false;
  bool has_lse_log2 = false;
  size_t total_bytes = 0;
};

// Region offsets for `tokens` tokens of `heads` query heads of `head_dim`, with a dQ accumulator
// (unless deterministic) of dq_accum_rows rows of head_dim floats per head: the portable family
// keeps one row per token, the Hopper family adds padding rows (sm90/backward/dq_accumulator.h).
BackwardWorkspace plan_backward_workspace(int64_t tokens, int64_t dq_accum_rows, int64_t heads, int64_t head_dim,
                                          bool deterministic, bool stores_lse_log2);

}  // namespace dualkv::detail
