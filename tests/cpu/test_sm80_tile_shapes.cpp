// Tile shapes and shared-memory plans of the sm80 kernels (src/cuda/sm80/*/tile_shape*.h): every
// shape fits its kernel's warp layout and the shared memory of the GPUs it is chosen for, and each
// direction picks the fastest shape that fits.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>

#include "cpu/expect_error.h"
#include "cuda/sm80/backward/tile_shapes.h"
#include "cuda/sm80/forward/tile_shape.h"

namespace dualkv::detail::sm80 {
namespace {

// Opt-in shared memory per block: H100/H200, A100, sm_86/sm_89.
constexpr size_t kHopperLimit = 232448, kA100Limit = 166912, kSm86Limit = 101376;
constexpr int64_t kCompiledHeadDims[] = {64, 128, 256};

using dualkv_test::BadCall;
using dualkv_test::rejected_as_expected;

TEST(Sm80TileShapes, ForwardShapesFitTheKernel) {
  for (const ForwardTileShape& shape : kForwardTileShapes) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim) + ", block_m " + std::to_string(shape.block_m));
    EXPECT_EQ(find_forward_tile_shape(shape.head_dim, shape.block_m, shape.block_n), &shape) << "one shape per kernel";
    EXPECT_EQ(shape.head_dim % 64, 0) << "head_dim tiles use the 128-byte swizzle atom";
    // Each warp owns whole 16-row MMA strips; key blocks are whole 16-key MMA steps.
    EXPECT_EQ(shape.block_m % (16 * shape.warps), 0);
    EXPECT_EQ(shape.block_n % 16, 0);
    // The O accumulator, block_m / warps rows of head_dim fp32 per warp, leaves room in 255
    // registers per thread for the scores and the operands.
    EXPECT_LE(shape.block_m / shape.warps * shape.head_dim / 32, 128);
    EXPECT_LE(forward_shared_memory_bytes(shape), kA100Limit);
  }
  EXPECT_EQ(find_forward_tile_shape(96, 128, 64), nullptr);
}

TEST(Sm80TileShapes, EveryGpuFromSm80GetsAForwardShapeForEveryHeadDim) {
  for (const int64_t head_dim : kCompiledHeadDims) {
    for (const size_t limit : {kHopperLimit, kA100Limit, kSm86Limit}) {
      const ForwardTileShape& shape = select_forward_tile_shape(head_dim, limit, "limit");
      EXPECT_EQ(shape.head_dim, head_dim);
      EXPECT_LE(forward_shared_memory_bytes(shape), limit) << "d=" << head_dim << " limit=" << limit;
    }
  }
}

TEST(Sm80TileShapes, TheFastestForwardShapeThatFitsIsChosen) {
  // Head dim 256: 128-query tiles (131072 bytes) on A100 and Hopper, 64-query tiles (98304 bytes)
  // on sm_86/sm_89; head dims 64 and 128 run one shape everywhere.
  const ForwardTileShape& large = *find_forward_tile_shape(256, 128, 64);
  const ForwardTileShape& sm86 = *find_forward_tile_shape(256, 64, 64);
  EXPECT_EQ(forward_shared_memory_bytes(large), 131072u);
  EXPECT_EQ(forward_shared_memory_bytes(sm86), 98304u);
  EXPECT_EQ(&select_forward_tile_shape(256, kHopperLimit, "limit"), &large);
  EXPECT_EQ(&select_forward_tile_shape(256, kA100Limit, "limit"), &large);
  EXPECT_EQ(&select_forward_tile_shape(256, forward_shared_memory_bytes(large), "limit"), &large);
  EXPECT_EQ(&select_forward_tile_shape(256, forward_shared_memory_bytes(large) - 1, "limit"), &sm86);
  EXPECT_EQ(&select_forward_tile_shape(256, kSm86Limit, "limit"), &sm86);
  EXPECT_EQ(&select_forward_tile_shape(128, kSm86Limit, "limit"), find_forward_tile_shape(128, 128, 64));
  EXPECT_EQ(&select_forward_tile_shape(64, kSm86Limit, "limit"), find_forward_tile_shape(64, 128, 128));
}

TEST(Sm80TileShapes, ForwardErrorsNameTheLimitOrTheHeadDim) {
  const ForwardTileShape& sm86 = *find_forward_tile_shape(256, 64, 64);
  const size_t least = forward_shared_memory_bytes(sm86);
  EXPECT_TRUE(rejected_as_expected(
      {"", [&] { select_forward_tile_shape(256, least - 1, "options.max_shared_memory_per_block"); },
       "options.max_shared_memory_per_block", std::to_string(least) + " bytes"}));
  EXPECT_NO_THROW(select_forward_tile_shape(256, least, "limit"));
  EXPECT_TRUE(rejected_as_expected({"", [] { select_forward_tile_shape(96, kHopperLimit, "limit"); }, "q.head_dim",
                                    "not compiled for head_dim 96"}));
}

TEST(Sm80TileShapes, BackwardShapesFitTheKernels) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    SCOPED_TRACE("head_dim " + std::to_string(shape.head_dim) + ", key_block " + std::to_string(shape.key_block));
    EXPECT_EQ(find_backward_tile_shape(shape.head_dim, shape.key_block, shape.query_block), &shape)
        << "one shape per kernel";
    EXPECT_TRUE(shape.query_stages == 1 || shape.query_stages == 2);
    EXPECT_EQ(shape.head_dim % 64, 0) << "head_dim tiles use the 128-byte swizzle atom";
    EXPECT_EQ(shape.key_block % shape.query_block, 0) << "query tiles line up with key tiles";
    // KV-major kernel: kv_warps warps in a (kv_warps / 2) x 2 grid shared by the key x query and
    // key x d GEMMs, and a 2 x (kv_warps / 2) grid for the atomic mode's query x d GEMM, each warp
    // covering 16 x 16 per MMA tile.
    EXPECT_EQ(shape.kv_warps % 2, 0);
    EXPECT_LE(shape.kv_warps, 16) << "at most 512 threads";
    EXPECT_EQ(shape.key_block % (16 * shape.kv_warps / 2), 0);
    EXPECT_EQ(shape.head_dim % (16 * shape.kv_warps / 2), 0);
    EXPECT_EQ(shape.query_block % 32, 0) << "two warp columns over the query tile; 32- or 64-column score atom";
    EXPECT_LE(2 * shape.query_block, shape.kv_warps * 32) << "one thread per LSE and D value";
    // dK and dV in fp32 registers, and 16 query rows x head_dim of dQ per dQ-kernel warp, leave
    // room in 255 registers per thread for the scores and the operands.
    EXPECT_LE(2 * shape.key_block * shape.head_dim / (32 * shape.kv_warps), 128);
    EXPECT_LE(16 * shape.head_dim / 32, 128);
    EXPECT_EQ(shape.dq_query_block % 16, 0);
    EXPECT_EQ(shape.dq_key_block % 16, 0);
  }
  EXPECT_EQ(find_backward_tile_shape(96, 128, 64), nullptr);
  EXPECT_EQ(find_backward_tile_shape(128, 32, 32), nullptr);
}

TEST(Sm80TileShapes, EveryGpuFromSm80GetsABackwardShapeForEveryHeadDim) {
  for (const int64_t head_dim : kCompiledHeadDims) {
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

TEST(Sm80TileShapes, TheFastestBackwardShapeThatFitsIsChosen) {
  // Head dim 128: 128 x 64 tiles, double-buffered (164864 bytes), where they fit; 128 x 32 tiles,
  // single-buffered (98560 bytes) on sm_86/sm_89. Head dim 256: 64 x 64 tiles (KV kernel 147968
  // bytes, dQ kernel 131584) on A100 and Hopper; 32 x 32 tiles (69888 bytes; dQ kernel 98816) on
  // sm_86/sm_89.
  const BackwardTileShape& large = *find_backward_tile_shape(128, 128, 64);
  const BackwardTileShape& sm86 = *find_backward_tile_shape(128, 128, 32);
  const BackwardTileShape& large256 = *find_backward_tile_shape(256, 64, 64);
  const BackwardTileShape& sm86_256 = *find_backward_tile_shape(256, 32, 32);
  for (const bool deterministic : {false, true}) {
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kHopperLimit, "limit"), &large);
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kA100Limit, "limit"), &large);
    EXPECT_EQ(&select_backward_tile_shape(128, deterministic, kSm86Limit, "limit"), &sm86);
    EXPECT_EQ(&select_backward_tile_shape(64, deterministic, kSm86Limit, "limit"),
              find_backward_tile_shape(64, 128, 64));
    EXPECT_EQ(&select_backward_tile_shape(256, deterministic, kHopperLimit, "limit"), &large256);
    EXPECT_EQ(&select_backward_tile_shape(256, deterministic, kA100Limit, "limit"), &large256);
    EXPECT_EQ(&select_backward_tile_shape(256, deterministic, kSm86Limit, "limit"), &sm86_256);
  }
  EXPECT_EQ(backward_kv_shared_memory_bytes(large), 164864u);
  EXPECT_EQ(&select_backward_tile_shape(128, false, backward_kv_shared_memory_bytes(large), "limit"), &large);
  EXPECT_NE(&select_backward_tile_shape(128, false, backward_kv_shared_memory_bytes(large) - 1, "limit"), &large);

  EXPECT_EQ(backward_kv_shared_memory_bytes(large256), 147968u);
  EXPECT_EQ(backward_dq_shared_memory_bytes(large256), 131584u);
  EXPECT_EQ(backward_kv_shared_memory_bytes(sm86_256), 69888u);
  EXPECT_EQ(backward_dq_shared_memory_bytes(sm86_256), 98816u);
  for (const bool deterministic : {false, true}) {
    const size_t bytes = backward_shared_memory_bytes(large256, deterministic);
    EXPECT_EQ(&select_backward_tile_shape(256, deterministic, bytes, "limit"), &large256);
    EXPECT_EQ(&select_backward_tile_shape(256, deterministic, bytes - 1, "limit"), &sm86_256);
  }
}

TEST(Sm80TileShapes, ALimitNoBackwardShapeFitsIsAnErrorNamingTheLimit) {
  for (const auto& [head_dim, key_block, query_block] : {std::tuple{128, 128, 32}, std::tuple{256, 32, 32}}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const BackwardTileShape& small = *find_backward_tile_shape(head_dim, key_block, query_block);
    const size_t least = backward_shared_memory_bytes(small, true);
    EXPECT_EQ(least, backward_dq_shared_memory_bytes(small)) << "the deterministic dQ kernel is the larger one";
    EXPECT_TRUE(rejected_as_expected(
        {"", [&] { select_backward_tile_shape(head_dim, true, least - 1, "options.max_shared_memory_per_block"); },
         "options.max_shared_memory_per_block", std::to_string(least) + " bytes"}));
    EXPECT_NO_THROW(select_backward_tile_shape(head_dim, true, least, "limit"));
  }
}

TEST(Sm80TileShapes, UncompiledHeadDimIsABackwardError) {
  EXPECT_TRUE(rejected_as_expected({"", [] { select_backward_tile_shape(96, false, kHopperLimit, "limit"); },
                                    "q.head_dim", "not compiled for head_dim 96"}));
}

TEST(Sm80TileShapes, CompiledHeadDimListsMatchTheTables) {
  constexpr int kListed[] = {64, 128, 256};
  static_assert(lists_head_dims_of(kListed, kForwardTileShapes));
  static_assert(lists_head_dims_of(kListed, kBackwardTileShapes));
  constexpr int kMissing[] = {64, 128};
  static_assert(!lists_head_dims_of(kMissing, kBackwardTileShapes));
  constexpr int kExtra[] = {64, 96, 128, 256};
  static_assert(!lists_head_dims_of(kExtra, kForwardTileShapes));
}

}  // namespace
}  // namespace dualkv::detail::sm80
