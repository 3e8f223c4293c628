// The forward work plan against the mask definition of design section 2: every query row in
// exactly one tile, and the key ranges a tile reads are exactly the keys each of its rows sees.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "dualkv/layout.h"
#include "host/work_plan.h"

namespace dualkv::detail {
namespace {

// Segment and group of every token, recomputed from the offsets alone.
struct TokenOwners {
  std::vector<int32_t> segment, group;
  std::vector<bool> in_prompt;
};

TokenOwners owners_of(const Layout& layout) {
  TokenOwners owners;
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    for (int32_t s = layout.cu_groups()[g]; s < layout.cu_groups()[g + 1]; ++s) {
      for (int32_t t = layout.cu_seqlens()[s]; t < layout.cu_seqlens()[s + 1]; ++t) {
        owners.segment.push_back(s);
        owners.group.push_back(g);
        owners.in_prompt.push_back(s == layout.cu_groups()[g]);
      }
    }
  }
  return owners;
}

// Query q sees key k iff same group, k <= q, and k in the prompt or in q's own segment.
bool visible(const TokenOwners& o, int32_t q, int32_t k) {
  return o.group[q] == o.group[k] && k <= q && (o.in_prompt[k] || o.segment[k] == o.segment[q]);
}

void check_plan(const Layout& layout, int block_m) {
  SCOPED_TRACE("block_m " + std::to_string(block_m));
  const TokenOwners owners = owners_of(layout);
  const int32_t tokens = layout.total_tokens();
  const std::vector<ForwardTile> tiles = plan_forward_tiles(layout, block_m);
  ASSERT_EQ(static_cast<int64_t>(tiles.size()), count_forward_tiles(layout, block_m));

  std::vector<int> covered(tokens, 0);
  for (size_t i = 0; i < tiles.size(); ++i) {
    const ForwardTile& tile = tiles[i];
    SCOPED_TRACE("tile " + std::to_string(i) + " rows [" + std::to_string(tile.q_begin) + ", " +
                 std::to_string(tile.q_end) + ")");
    ASSERT_LT(tile.q_begin, tile.q_end);
    ASSERT_LE(tile.q_end - tile.q_begin, block_m);
    ASSERT_GE(tile.q_begin, 0);
    ASSERT_LE(tile.q_end, tokens);
    // Tiles start every block_m rows from their segment's start: only a segment's last tile is short.
    EXPECT_EQ((tile.q_begin - tile.self_begin) % block_m, 0);
    const int32_t segment = owners.segment[tile.q_begin];
    EXPECT_EQ(owners.segment[tile.q_end - 1], segment) << "tile straddles segments";
    EXPECT_TRUE(tile.q_end == tokens || owners.segment[tile.q_end] != segment || tile.q_end - tile.q_begin == block_m);
    EXPECT_LE(tile.prompt_begin, tile.prompt_end);

    for (int32_t q = tile.q_begin; q < tile.q_end; ++q) {
      ++covered[q];
      for (int32_t k = 0; k < tokens; ++k) {
        const bool read = (k >= tile.prompt_begin && k < tile.prompt_end) || (k >= tile.self_begin && k <= q);
        ASSERT_EQ(read, visible(owners, q, k)) << "query " << q << " key " << k;
      }
    }
    // The prompt range and the causal range never overlap, so no key is counted twice.
    EXPECT_TRUE(tile.prompt_end <= tile.self_begin || tile.prompt_begin == tile.prompt_end);
    if (i > 0) {
      EXPECT_GE(forward_tile_keys(tiles[i - 1]), forward_tile_keys(tile)) << "not heaviest first";
    }
  }
  for (int32_t t = 0; t < tokens; ++t) EXPECT_EQ(covered[t], 1) << "token " << t;
}

TEST(WorkPlan, SingleGroupSingleTokenSegments) {
  check_plan(Layout::from_lengths({1}, {{1}}), 128);
  check_plan(Layout::from_lengths({1}, {{1, 1, 1}}), 64);
}

TEST(WorkPlan, SegmentsAroundTileBoundaries) {
  const Layout layout = Layout::from_lengths({17, 129, 128}, {{1, 128, 129}, {127, 2}, {256, 1, 64}});
  for (int block_m : {16, 64, 128}) check_plan(layout, block_m);
}

TEST(WorkPlan, RandomRaggedLayouts) {
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int64_t> length(1, 300);
  std::uniform_int_distribution<int> count(1, 5);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> prompts;
    std::vector<std::vector<int64_t>> responses;
    for (int g = count(rng); g > 0; --g) {
      prompts.push_back(length(rng));
      responses.emplace_back();
      for (int r = count(rng); r > 0; --r) responses.back().push_back(length(rng));
    }
    check_plan(Layout::from_lengths(prompts, responses), 64 << (trial % 2));
  }
}

TEST(WorkPlan, TileShapesFitTheKernel) {
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
}  // namespace dualkv::detail
