// Tile shapes of the sm90 forward kernel, plain C++ so that CPU tests and the host entry read the
// same table the kernel is built from.
//
// A CTA holds one query tile of block_m = 64 * consumer_warpgroups rows (each consumer warpgroup
// owns 64 rows: one wgmma M) and walks its key blocks of block_n keys through `stages` K and V
// shared-memory buffers. Shared memory: Q (block_m x d) + stages x K (block_n x d) + stages x V
// (block_n x d), 16-bit elements, plus the pipeline barriers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dualkv::detail::sm90 {

struct ForwardTileShape {
  int head_dim;
  int block_m;
  int block_n;
  int stages;
};

// head_dim 256: O of a warpgroup's 64 rows is 128 registers per thread, so 64-key blocks (S and
// the two P buffers 32 + 2 x 16 registers) and two stages (192 KiB).
inline constexpr ForwardTileShape kForwardTileShapes[] = {
    {64, 128, 128, 3},
    {128, 128, 128, 2},
    {256, 128, 64, 2},
};

// The compiled shape for head_dim, or nullptr.
constexpr const ForwardTileShape* find_forward_tile_shape(int64_t head_dim) {
  for (const ForwardTileShape& shape : kForwardTileShapes) {
    if (shape.head_dim == head_dim) return &shape;
  }
  return nullptr;
}

// Bytes of the Q, K and V buffers; the kernel's shared storage adds its barriers (at most 1 KiB).
constexpr size_t forward_tile_bytes(const ForwardTileShape& shape) {
  return static_cast<size_t>(shape.block_m + 2 * shape.stages * shape.block_n) * static_cast<size_t>(shape.head_dim) *
         2;
}

}  // namespace dualkv::detail::sm90
