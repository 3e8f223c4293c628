// Tile shapes and shared-memory plans of the sm80 kernels (src/cuda/sm80/*/tile_shape*.h): every
// shape fits its kernel's warp layout and the shared memory of the GPUs it is chosen for, and the
// backward picks the fastest shape that fits.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/sm80/backward/tile_shapes.h"
#include "cuda/sm80/forward/tile_shape.h"
#include "dualkv/errors.h"

namespace dualkv::detail::sm80 {
namespace {

TEST(Sm80TileShapes, ForwardShapesFitTheKernel) {
  for (int head_dim : {64, 128, 256}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const ForwardTileShape shape = forward_tile_shape(head_dim);
    // Each warp owns whole 16-row MMA strips; key blocks are whole 16-key MMA steps.
    EXPECT_EQ(shape.block_m % (16 * shape.warps), 0);
    EXPECT_EQ(shape.block_n % 16, 0);
    // Opt-in shared memory of one sm_80 CTA.
    EXPECT_LE(forward_shared_memory_bytes(head_dim), 163u * 1024u);
  }
}

TEST(Sm80TileShapes, BackwardShapesFitTheKernels) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    EXPECT_EQ(find_backward_tile_shape(shape.head_dim, shape.key_block, shape.query_block), &shape)
        << "one shape per kernel";
    EXPECT_TRUE(shape.query_stages == 1 || shape.query_stages == 2);
    EXPECT_EQ(shape.head_dim % 64, 0) << "head_dim tiles use the 128-byte swizzle atom";
    EXPECT_EQ(shape.key_block % shape.query_block, 0) << "query tiles line up with key tiles";
    // KV-major kernel: key_block / 16 warps in a (key_block / 32) x 2 grid shared by every GEMM
    // (key x query, key x d, query x d), each warp covering 16 x 16 per MMA tile.
    EXPECT_EQ(shape.key_block % 32, 0);
    EXPECT_LE(shape.key_block / 16, 16) << "at most 512 threads";
    EXPECT_EQ(shape.query_block % 32, 0) << "two warp columns over the query tile; 32- or 64-column score atom";
    EXPECT_LE(2 * shape.query_block, shape.key_block / 16 * 32) << "one thread per LSE and D value";
    EXPECT_EQ(shape.dq_query_block % 16, 0);
    EXPECT_EQ(shape.dq_key_block % 16, 0);
  }
  EXPECT_EQ(find_backward_tile_shape(96, 128, 64), nullptr);
  EXPECT_EQ(find_backward_tile_shape(128, 32, 32), nullptr);
}

// Opt-in shared memory per block: H100/H200, A100, sm_86/sm_89.
constexpr size_t kHopperLimit = 232448, kA100Limit = 166912, kSm86Limit = 101376;

TEST(Sm80TileShapes, EveryGpuFromSm80GetsAShapeForEveryHeadDim) {
  for (const int64_t head_dim : {64, 128}) {
    for (const size_t limit : {kHopperLimit, kA100Limit, kSm86Limit}) {
      for (const bool deterministic : {false, true}) {
        const BackwardTileShape& shape = select_backward_tile_shape(head_dim, deterministic, limit, "limit");
        EXPECT_EQ(shape.head_dim, head_dim);
        EXPECT_LE(backward_shared_memory_bytes(shape, deterministic), limit) << "d=" << head_dim << " limit=" << limit;
        EXPECT_LE(backward_kv_shared_memory_bytes(shape), limit);
        if (deterministic) EXPECT_LE(backward_dq_shared_memory_bytes(shape), limit);
      }
    }
  }
}

TEST(Sm80TileShapes, TheFastestShapeThatFitsIsChosen) {
  // Head dim 128: 128 x 64 tiles, double-buffered (164864 bytes), where they fit; 128 x 32 tiles,
  // single-buffered (98560 bytes) on sm_86/sm_89.
  const BackwardTileShape& large = *find_backward_tile_shape(128, 128, 64);
  const BackwardTileShape& sm86 = *find_backward_tile_shape(128, 128, 32);
  for (const bool deterministic : {false, true}) {
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kHopperLimit, "limit"), &large);
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kA100Limit, "limit"), &large);
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kSm86Limit, "limit"), &sm86);
    EXPECT_EQ(&select_backward_tile_shape(64, deterministic, kSm86Limit, "limit"),
              find_backward_tile_shape(64, 128, 64));
  }
  EXPECT_EQ(backward_kv_shared_memory_bytes(large), 164864u);
  EXPECT_EQ(&select_backward_tile_shape(128, false, backward_kv_shared_memory_bytes(large), "limit"), &large);
  EXPECT_NE(&select_backward_tile_shape(128, false, backward_kv_shared_memory_bytes(large) - 1, "limit"), &large);
}

TEST(Sm80TileShapes, ALimitNoShapeFitsIsAnErrorNamingTheLimit) {
  const BackwardTileShape& small = *find_backward_tile_shape(128, 128, 32);
  const size_t least = backward_shared_memory_bytes(small, true);
  EXPECT_EQ(least, backward_dq_shared_memory_bytes(small)) << "the deterministic dQ kernel is the larger one";
  try {
    select_backward_tile_shape(128, true, least - 1, "options.max_shared_memory_per_block");
    ADD_FAILURE() << "no head_dim 128 shape fits " << least - 1 << " bytes";
  } catch (const dualkv::Error& error) {
    EXPECT_EQ(error.argument(), "options.max_shared_memory_per_block");
    EXPECT_NE(std::string(error.rule()).find(std::to_string(least) + " bytes"), std::string::npos) << error.rule();
  }
  EXPECT_NO_THROW(select_backward_tile_shape(128, true, least, "limit"));
}

TEST(Sm80TileShapes, UncompiledHeadDimIsAnError) {
  try {
    select_backward_tile_shape(96, false, kHopperLimit, "limit");
    ADD_FAILURE() << "head_dim 96 is not compiled";
  } catch (const dualkv::Error& error) {
    EXPECT_EQ(error.argument(), "q.head_dim");
  }
}

}  // namespace
}  // namespace dualkv::detail::sm80
