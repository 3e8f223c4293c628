// Tile shapes and shared-memory plans of the sm80 kernels (src/cuda/sm80/*/tile_shape*.h): every
// shape fits the kernel's warp layout and the shared memory of the GPUs it is chosen for.
#include <gtest/gtest.h>

#include <string>

#include "cuda/sm80/forward/tile_shape.h"

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

}  // namespace
}  // namespace dualkv::detail::sm80
