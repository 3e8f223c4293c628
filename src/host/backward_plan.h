// Work plan of the CUDA backward pass (plain C++, so a CPU test can check it).
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

// Tile shapes of the backward kernels. The KV-major kernel keeps a (key_block x head_dim) dK and dV
// tile in fp32 registers over key_block / 16 warps (a (key_block / 32) x 2 warp grid). The dQ
// kernel keeps a (dq_query_block x head_dim) dQ tile: dq_query_block / 16 warps, 16 rows each.
struct BackwardTileShape {
  int head_dim;
  int key_block;       // KV-major kernel: keys per work item
  int query_block;     // KV-major kernel: queries per inner step
  int query_stages;    // KV-major kernel: Q/dO buffers; 2 lets the next step's loads overlap a whole step
  int dq_query_block;  // dQ kernel: queries per work item
  int dq_key_block;    // dQ kernel: keys per inner step
};

// Every compiled shape, fastest first within a head_dim: a backward runs the first shape of its
// head_dim whose kernels fit the shared memory a block may use (select_backward_tile_shape).
// Opt-in limits per block: H100/H200 227 KiB, A100 163 KiB, sm_86/sm_89 (A10, L40, RTX 30/40)
// 99 KiB. Each (head_dim, key_block, query_block) is one kernel instantiation
// (src/cuda/backward_<dtype>_d<head_dim>_k<key_block>_q<query_block>.cu).
inline constexpr BackwardTileShape kBackwardTileShapes[] = {
    {64, 128, 64, 2, 64, 64},   // KV kernel 97 KiB: every sm_80+ GPU
    {128, 128, 64, 2, 64, 64},  // KV kernel 161 KiB: A100, H100, H200
    {128, 128, 32, 1, 64, 64},  // KV kernel 96.3 KiB: sm_86/sm_89 (1.18x the time of 128 x 64 on an H100)
};

// The compiled shape of (head_dim, key_block, query_block), or nullptr.
constexpr const BackwardTileShape* find_backward_tile_shape(int64_t head_dim, int key_block, int query_block) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    if (shape.head_dim == head_dim && shape.key_block == key_block && shape.query_block == query_block) return &shape;
  }
  return nullptr;
}

// Shared memory of one KV-major CTA (16-bit elements): K and V tiles; Q and dO tiles per stage;
// P^T and dS^T; LSE and D per stage (kv_kernel.cuh's KvSharedStorage; the launcher asserts they
// agree).
constexpr size_t backward_kv_shared_memory_bytes(const BackwardTileShape& shape) {
  const auto key = static_cast<size_t>(shape.key_block);
  const auto query = static_cast<size_t>(shape.query_block);
  const auto stages = static_cast<size_t>(shape.query_stages);
  const auto dim = static_cast<size_t>(shape.head_dim);
  return (2 * key * dim + stages * 2 * query * dim + 2 * key * query) * 2 + stages * 2 * query * sizeof(float);
}

// Shared memory of one deterministic dQ CTA: Q and dO tiles; K and V tiles in two stages; LSE and
// D (dq_kernel.cuh's DqSharedStorage).
constexpr size_t backward_dq_shared_memory_bytes(const BackwardTileShape& shape) {
  const auto query = static_cast<size_t>(shape.dq_query_block);
  const auto key = static_cast<size_t>(shape.dq_key_block);
  const auto dim = static_cast<size_t>(shape.head_dim);
  return (2 * query * dim + 2 * 2 * key * dim) * 2 + 2 * query * sizeof(float);
}

// The most shared memory any kernel of a backward with `shape` asks for per block.
constexpr size_t backward_shared_memory_bytes(const BackwardTileShape& shape, bool deterministic) {
  const size_t kv = backward_kv_shared_memory_bytes(shape);
  const size_t dq = backward_dq_shared_memory_bytes(shape);
  return deterministic && dq > kv ? dq : kv;
}

// The first shape of head_dim (fastest first) whose kernels fit `limit_bytes` of shared memory
// per block. Throws dualkv::Error naming q.head_dim if no shape is compiled for head_dim, and
// naming `limit_name` if none fits the limit.
const BackwardTileShape& select_backward_tile_shape(int64_t head_dim, bool deterministic, size_t limit_bytes,
                                                    const char* limit_name);

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

// Region offsets for `heads` query heads with the tiles of `shape`.
BackwardWorkspace plan_backward_workspace(const Layout& layout, int64_t heads, const BackwardTileShape& shape,
                                          bool deterministic);

}  // namespace dualkv::detail
