// Tile shapes of the sm90 kernels (src/cuda/sm90/*/tile_shape.h): each kernel's shared storage, its
// tiles and barriers rounded up to the 128-byte swizzle's 1024-byte period plus the 1 KiB the
// kernels ask for to align the storage, fits one Hopper CTA (the head_dim 256 backward fills it to
// the byte). A tile that grows past it fails here instead of at launch on a GPU, which CI does not
// have.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "cuda/sm90/backward/tile_shape.h"
#include "cuda/sm90/forward/tile_shape.h"

namespace dualkv::detail::sm90 {
namespace {

// Opt-in shared memory per block on H100 and H200 (cudaDevAttrMaxSharedMemoryPerBlockOptin).
constexpr size_t kHopperLimit = 232448;
// The shared storage: the tiles plus the barriers (a few dozen bytes), its size a multiple of the
// 1024-byte alignment of its SW128 tiles, plus the 1 KiB the kernels ask for to align the storage
// itself (kSmemBytes in config.cuh and split_d_config.cuh).
constexpr size_t kBarrierBytes = 256;
constexpr size_t storage_bytes(size_t tile_bytes) { return (tile_bytes + kBarrierBytes + 1023) / 1024 * 1024 + 1024; }

TEST(Sm90TileShapes, ForwardShapesFitOneHopperCta) {
  for (const ForwardTileShape& shape : kForwardTileShapes) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim));
    EXPECT_EQ(find_forward_tile_shape(shape.head_dim), &shape) << "one shape per head_dim";
    EXPECT_EQ(shape.block_m % 64, 0) << "each consumer warpgroup owns 64 rows (one wgmma M)";
    EXPECT_EQ(shape.head_dim % 64, 0) << "tiles are 64-column panels under the 128-byte swizzle";
    EXPECT_LE(storage_bytes(forward_tile_bytes(shape)), kHopperLimit);
  }
  EXPECT_EQ(find_forward_tile_shape(96), nullptr);
}

TEST(Sm90TileShapes, BackwardShapesFitOneHopperCta) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim));
    EXPECT_EQ(find_backward_tile_shape(shape.head_dim), &shape) << "one shape per head_dim";
    if (shape.split == BackwardSplit::kKeys) {
      EXPECT_EQ(shape.block_n, 128) << "two consumer warpgroups of 64 keys (the register budget's assumption)";
    } else {
      EXPECT_EQ(shape.block_n, 64) << "one wgmma M of keys, both warpgroups on it";
      EXPECT_EQ(shape.block_m, 64) << "the step's P^T and dS^T are one 128-byte swizzle atom wide";
      EXPECT_EQ(shape.head_dim % 128, 0) << "each warpgroup owns 64-column dQ blocks of its half";
    }
    EXPECT_EQ(shape.block_m % 64, 0) << "the dQ blocks are 64 x 64";
    EXPECT_EQ(shape.head_dim % 64, 0) << "tiles are 64-column panels under the 128-byte swizzle";
    EXPECT_LE(storage_bytes(backward_tile_bytes(shape)), kHopperLimit);
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

TEST(Sm90TileShapes, SplitHeadDimBackwardKeepsScoresNotDqInSharedMemory) {
  // K and V; two stages of Q, dO, P^T, dS^T and the statistics rows; dQ leaves from registers.
  const BackwardTileShape& shape = *find_backward_tile_shape(256);
  EXPECT_EQ(shape.split, BackwardSplit::kHeadDim);
  const size_t key_value = 2 * 64 * 256 * 2;
  const size_t per_stage = 2 * 64 * 256 * 2 + 2 * 64 * 64 * 2 + 2 * (64 + 4) * 4;
  EXPECT_EQ(backward_tile_bytes(shape), key_value + 2 * per_stage);
}

}  // namespace
}  // namespace dualkv::detail::sm90
