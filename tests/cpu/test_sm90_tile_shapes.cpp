// Tile shapes of the sm90 kernels (src/cuda/sm90/*/tile_shape.h): each kernel's shared storage, its
// tiles plus at most 1 KiB of barriers plus the 1 KiB the kernels ask for to align the storage to
// the 128-byte swizzle's 1024-byte period, fits one Hopper CTA. A tile that grows past it (session
// 19's dQ staging buffers added 32 KiB to the backward) fails here instead of at launch on a GPU,
// which CI does not have.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "cuda/sm90/backward/tile_shape.h"
#include "cuda/sm90/forward/tile_shape.h"

namespace dualkv::detail::sm90 {
namespace {

// Opt-in shared memory per block on H100 and H200 (cudaDevAttrMaxSharedMemoryPerBlockOptin).
constexpr size_t kHopperLimit = 232448;
// Barriers (at most 1 KiB, tile_shape.h) and the alignment slack (kSmemBytes in config.cuh).
constexpr size_t kStorageOverhead = 2 * 1024;

TEST(Sm90TileShapes, ForwardShapesFitOneHopperCta) {
  for (const ForwardTileShape& shape : kForwardTileShapes) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim));
    EXPECT_EQ(find_forward_tile_shape(shape.head_dim), &shape) << "one shape per head_dim";
    EXPECT_EQ(shape.block_m % 64, 0) << "each consumer warpgroup owns 64 rows (one wgmma M)";
    EXPECT_EQ(shape.head_dim % 64, 0) << "tiles are 64-column panels under the 128-byte swizzle";
    EXPECT_LE(forward_tile_bytes(shape) + kStorageOverhead, kHopperLimit);
  }
  EXPECT_EQ(find_forward_tile_shape(96), nullptr);
}

TEST(Sm90TileShapes, BackwardShapesFitOneHopperCta) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim));
    EXPECT_EQ(find_backward_tile_shape(shape.head_dim), &shape) << "one shape per head_dim";
    EXPECT_EQ(shape.block_n, 128) << "two consumer warpgroups of 64 keys (the register budget's assumption)";
    EXPECT_EQ(shape.block_m % 64, 0) << "the dQ blocks are 64 x 64 per warpgroup";
    EXPECT_EQ(shape.head_dim % 64, 0) << "tiles are 64-column panels under the 128-byte swizzle";
    EXPECT_LE(backward_tile_bytes(shape) + kStorageOverhead, kHopperLimit);
  }
  EXPECT_EQ(find_backward_tile_shape(96), nullptr);
}

TEST(Sm90TileShapes, BackwardTileBytesCountTheDqStagingBuffers) {
  // K and V, two stages of Q, dO, dS and the statistics rows, and one 64 x 64 fp32 dQ block per
  // consumer warpgroup: the head_dim 128 shape by hand.
  const BackwardTileShape& shape = *find_backward_tile_shape(128);
  const size_t key_value = 2 * 128 * 128 * 2;
  const size_t per_stage = 2 * 64 * 128 * 2 + 64 * 128 * 2 + 2 * (64 + 4) * 4;
  const size_t dq_staging = 2 * 64 * 64 * 4;
  EXPECT_EQ(backward_tile_bytes(shape), key_value + 2 * per_stage + dq_staging);
}

}  // namespace
}  // namespace dualkv::detail::sm90
