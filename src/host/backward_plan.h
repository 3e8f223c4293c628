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
// response tiles fill the tail of the grid.
//
// Device workspace (one allocation, every region 16-byte aligned):
//   dq_accum   fp32 (H, T, d), contiguous; only when dQ is accumulated with atomics
//   delta      fp32 (H, T): D = rowsum(dO * O), the softmax-gradient correction per query
//   cu_seqlens int32 (S + 1): the layout's segment offsets, for the kernels' query/key ranges
//   tiles      TileWork[]: key tiles, then query tiles when deterministic
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dualkv/layout.h"

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

struct BackwardWorkspace {
  size_t dq_accum_offset = 0;  // meaningful only if has_dq_accum
  size_t delta_offset = 0;
  size_t cu_seqlens_offset = 0;
  size_t key_tiles_offset = 0;
  size_t query_tiles_offset = 0;  // meaningful only if deterministic
  int64_t num_key_tiles = 0;
  int64_t num_query_tiles = 0;  // 0 unless deterministic
  bool has_dq_accum = false;
  size_t total_bytes = 0;
};

// Region offsets for `heads` query heads of `head_dim`, with key tiles of key_block tokens and, when
// deterministic, query tiles of dq_query_block tokens.
BackwardWorkspace plan_backward_workspace(const Layout& layout, int64_t heads, int64_t head_dim, int key_block,
                                          int dq_query_block, bool deterministic);

}  // namespace dualkv::detail
