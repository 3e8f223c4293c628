// Tile shapes of the sm90 backward kernel, plain C++ so that CPU tests and the host entry read the
// same table the kernel is built from.
//
// A CTA owns one key tile of block_n keys of one KV head and walks the query tiles that see it in
// steps of block_m queries, through `stages` Q and dO shared-memory buffers, with two consumer
// warpgroups. How they share the work (`split`):
//   kKeys (kernel.cuh, head_dim <= 128): each owns 64 keys (one wgmma M) and all of dK and dV of
//     them; shared memory: K and V (block_n x d), stages x Q and dO (block_m x d), stages x dS
//     (block_m x block_n), all 16-bit; stages x LSE and D (block_m + 4 fp32); per consumer
//     warpgroup one 64 x 64 fp32 dQ block, staged for the dQ warp's bulk reduction; the barriers.
//   kHeadDim (split_d_kernel.cuh, head_dim 256): dK and dV of 64 keys x 256 columns do not fit one
//     warpgroup's registers, so each owns half of the columns of dK, dV and dQ and half of the
//     step's queries of S^T and dP^T; P^T and dS^T cross shared memory. Shared memory: K and V,
//     stages x Q and dO, stages x P^T and dS^T (block_n x block_m), stages x LSE and D; dQ goes to
//     the accumulator by vector reductions from registers, no staging.
//
// walk_lead_steps > 0 paces the walks (walk_pacing.h): a key tile's producer runs at most that many
// query steps ahead of the key tile before it in the plan while both walk the same query head.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dualkv::detail::sm90 {

// How the two consumer warpgroups share a key tile (see above).
enum class BackwardSplit { kKeys, kHeadDim };

struct BackwardTileShape {
  int head_dim;
  int block_n;  // keys per CTA
  int block_m;  // queries per step
  int stages;
  BackwardSplit split;
  int walk_lead_steps;  // 0: walks not paced
};

// A consumer warpgroup's 64 x 64 fp32 dQ block, staged in shared memory for the dQ warp.
inline constexpr int kStagedDqFloats = 64 * 64;

// head_dim 64 steps over 128 queries (the dQ block of a warpgroup is then its half of the rows);
// head_dim 128 over 64 (its half of the columns), which keeps dK, dV, S^T and dP^T in 240 registers.
// head_dim 256: 64 keys, 64-query steps; a warpgroup holds 64 x 128 of dK, dV and (briefly) dQ:
// 192 accumulator registers. Its walks are paced one step (docs/performance.md: unpaced, its key
// tiles drift apart until their Q, dO and dQ lines no longer fit L2; a lead of 1 or 2 steps ran
// alike, 3 fell off that cliff at 24:4 (16, 32K)). head_dim 128's walks are not: pacing them moved
// its backward by -1.3% to +0.5% at 32:8 (one run).
inline constexpr BackwardTileShape kBackwardTileShapes[] = {
    {64, 128, 128, 2, BackwardSplit::kKeys, 0},
    {128, 128, 64, 2, BackwardSplit::kKeys, 0},
    {256, 64, 64, 2, BackwardSplit::kHeadDim, 1},
};

// The compiled shape for head_dim, or nullptr.
constexpr const BackwardTileShape* find_backward_tile_shape(int64_t head_dim) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    if (shape.head_dim == head_dim) return &shape;
  }
  return nullptr;
}

// Bytes of the tiles; the kernel's shared storage adds its barriers (at most 1 KiB).
constexpr size_t backward_tile_bytes(const BackwardTileShape& shape) {
  const auto n = static_cast<size_t>(shape.block_n), m = static_cast<size_t>(shape.block_m),
             d = static_cast<size_t>(shape.head_dim), stages = static_cast<size_t>(shape.stages);
  const size_t stats = 2 * (m + 4) * 4;
  if (shape.split == BackwardSplit::kHeadDim) return 2 * n * d * 2 + stages * (2 * m * d * 2 + 2 * m * n * 2 + stats);
  return 2 * n * d * 2 + stages * (2 * m * d * 2 + m * n * 2 + stats) + n / 64 * kStagedDqFloats * 4;
}

}  // namespace dualkv::detail::sm90
