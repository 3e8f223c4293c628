// The forward work plan and the key-block walk every kernel family runs over it, against the mask
// definition of include/dualkv/layout.h (tree layouts, two-level ones among them): every query row in
// exactly one tile; walking a tile's blocks and applying each block's mask leaves exactly the keys
// each row sees, each once; unmasked blocks hold only visible pairs; a tile's ancestor ranges are
// merged wherever they touch.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "cpu/oracle_tree.h"
#include "cpu/tree_spec.h"
#include "cuda/common/key_block_walk.h"
#include "dualkv/layout.h"
#include "host/query_plan.h"

namespace dualkv::detail {
namespace {

// The tree's mask (oracle_tree.h) and the segment of every token, from the tree alone.
struct TokenOwners {
  std::vector<int64_t> segment;
  dualkv_test::oracle::KeyMask mask;
  explicit TokenOwners(const dualkv_test::TreeSpec& tree)
      : segment(dualkv_test::segment_of_tokens(tree)), mask(dualkv_test::oracle::tree_mask(tree)) {}
};

bool visible(const TokenOwners& o, int32_t q, int32_t k) { return o.mask.visible(q, k); }

dualkv_test::TreeSpec tree_of_lengths(const std::vector<int64_t>& prompts,
                                      const std::vector<std::vector<int64_t>>& responses) {
  dualkv_test::BatchSpec batch;
  for (size_t g = 0; g < prompts.size(); ++g) batch.push_back({prompts[g], responses[g]});
  return dualkv_test::tree_of(batch);
}

Layout layout_of(const dualkv_test::TreeSpec& tree) { return Layout::from_tree(tree.parents, tree.lengths); }

// What a kernel keeps of block key `key` for query `query` after the block's mask.
bool kept(BlockMask mask, int32_t query, int32_t key, int32_t range_end) {
  if (key >= range_end) return false;
  return mask != BlockMask::kCausal || key <= query;
}

template <int kBlockN>
void check_walk(const Layout& layout, const QueryPlan& plan, const QueryTile& tile, const TokenOwners& owners) {
  const int32_t tokens = layout.total_tokens();
  std::vector<std::vector<int>> seen(tile.q_end - tile.q_begin, std::vector<int>(tokens, 0));
  int32_t blocks = 0;
  for (KeyBlockWalk<kBlockN> walk(tile, plan.ranges.data()); !walk.done(); walk.advance(), ++blocks) {
    const int32_t key_end = walk.key_begin() + kBlockN;
    EXPECT_LT(walk.key_begin(), walk.range_end());
    EXPECT_EQ(walk.reaches_past_range(), key_end > walk.range_end());
    for (int32_t q = tile.q_begin; q < tile.q_end; ++q) {
      for (int32_t k = walk.key_begin(); k < key_end && k < tokens; ++k) {
        if (walk.mask() == BlockMask::kNone) {
          ASSERT_TRUE(visible(owners, q, k)) << "unmasked block holds hidden key " << k << " for query " << q;
        }
        if (kept(walk.mask(), q, k, walk.range_end())) ++seen[q - tile.q_begin][k];
      }
    }
  }
  EXPECT_EQ(blocks, (KeyBlockWalk<kBlockN>::count(tile, plan.ranges.data())));
  for (int32_t q = tile.q_begin; q < tile.q_end; ++q) {
    for (int32_t k = 0; k < tokens; ++k) {
      ASSERT_EQ(seen[q - tile.q_begin][k], visible(owners, q, k) ? 1 : 0) << "query " << q << " key " << k;
    }
  }
}

void check_plan(const dualkv_test::TreeSpec& tree, int block_m) {
  SCOPED_TRACE("block_m " + std::to_string(block_m));
  const Layout layout = layout_of(tree);
  const TokenOwners owners(tree);
  const QueryPlan plan = build_query_plan(layout, block_m);
  std::vector<int> covered(layout.total_tokens(), 0);
  for (size_t i = 0; i < plan.tiles.size(); ++i) {
    const QueryTile& tile = plan.tiles[i];
    SCOPED_TRACE("tile " + std::to_string(i) + " rows [" + std::to_string(tile.q_begin) + ", " +
                 std::to_string(tile.q_end) + ")");
    ASSERT_LT(tile.q_begin, tile.q_end);
    ASSERT_LE(tile.q_end - tile.q_begin, block_m);
    ASSERT_LT(tile.range_begin, tile.range_end);
    ASSERT_LE(tile.range_end, static_cast<int32_t>(plan.ranges.size()));
    const auto segment = static_cast<int32_t>(owners.segment[tile.q_begin]);
    EXPECT_EQ(owners.segment[tile.q_end - 1], segment) << "tile straddles segments";
    // Only a segment's last tile is short; the causal range is the tile's own segment.
    const KeyRange own = plan.ranges[tile.range_end - 1];
    EXPECT_EQ(own.begin, layout.segment_begin(segment));
    EXPECT_EQ(own.end, tile.q_end);
    EXPECT_EQ((tile.q_begin - own.begin) % block_m, 0);
    for (int32_t r = tile.range_begin + 1; r < tile.range_end; ++r) {
      EXPECT_LE(plan.ranges[r - 1].end, plan.ranges[r].begin) << "ranges overlap or are out of order";
      if (r + 1 < tile.range_end) EXPECT_LT(plan.ranges[r - 1].end, plan.ranges[r].begin) << "touching ancestors";
    }
    for (int32_t q = tile.q_begin; q < tile.q_end; ++q) ++covered[q];
    if (i > 0) {
      EXPECT_GE(visible_keys_of_last_row(plan, plan.tiles[i - 1]), visible_keys_of_last_row(plan, tile))
          << "not heaviest first";
    }
    check_walk<16>(layout, plan, tile, owners);
    check_walk<64>(layout, plan, tile, owners);
    check_walk<128>(layout, plan, tile, owners);
  }
  for (int32_t t = 0; t < layout.total_tokens(); ++t) EXPECT_EQ(covered[t], 1) << "token " << t;
}

TEST(QueryPlan, SingleTokenSegments) {
  check_plan(tree_of_lengths({1}, {{1}}), 128);
  check_plan(tree_of_lengths({1}, {{1, 1, 1}}), 64);
}

TEST(QueryPlan, SegmentsAroundBlockBoundaries) {
  const dualkv_test::TreeSpec tree = tree_of_lengths({17, 129, 128}, {{1, 128, 129}, {127, 2}, {256, 1, 64}});
  for (int block_m : {16, 64, 128}) check_plan(tree, block_m);
}

TEST(QueryPlan, RandomRaggedLayouts) {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int64_t> length(1, 300);
  std::uniform_int_distribution<int> count(1, 4);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<int64_t> prompts;
    std::vector<std::vector<int64_t>> responses;
    for (int g = count(rng); g > 0; --g) {
      prompts.push_back(length(rng));
      responses.emplace_back();
      for (int r = count(rng); r > 0; --r) responses.back().push_back(length(rng));
    }
    check_plan(tree_of_lengths(prompts, responses), 64 << (trial % 2));
  }
}

TEST(QueryPlan, RandomTrees) {
  std::mt19937_64 rng(20261201);
  for (int trial = 0; trial < 16; ++trial) {
    dualkv_test::TreeShape shape;
    shape.max_depth = 1 + trial % 16;
    shape.max_children = 1 + trial % 3;
    shape.roots = 1 + trial % 3;
    shape.max_length = trial % 4 == 0 ? 1 : 90;
    shape.depth_first = trial % 2 == 0;
    check_plan(dualkv_test::random_tree(shape, rng), trial % 3 == 0 ? 16 : 64);
  }
}

// A chain of one-token segments in packed order: each tile's ancestors are one merged range.
TEST(QueryPlan, ContiguousAncestorsAreOneRange) {
  dualkv_test::TreeSpec chain;
  for (int64_t s = 0; s < 40; ++s) {
    chain.parents.push_back(s - 1);
    chain.lengths.push_back(1 + s % 3);
  }
  const QueryPlan plan = build_query_plan(layout_of(chain), 64);
  for (const QueryTile& tile : plan.tiles) EXPECT_LE(tile.range_end - tile.range_begin, 2);
  check_plan(chain, 16);
}

TEST(QueryPlan, ResponseToPromptRectangleIsUnmasked) {
  // P and R multiples of the block: a response tile's prompt blocks and every own-segment block
  // before its diagonal run without a mask.
  const QueryPlan plan = build_query_plan(Layout::from_lengths({512}, {{256, 256}}), 128);
  for (const QueryTile& tile : plan.tiles) {
    int32_t unmasked = 0, blocks = 0;
    for (KeyBlockWalk<128> walk(tile, plan.ranges.data()); !walk.done(); walk.advance(), ++blocks) {
      unmasked += walk.mask() == BlockMask::kNone;
    }
    EXPECT_EQ(unmasked, blocks - 1) << "only the diagonal block needs a mask";
  }
}

}  // namespace
}  // namespace dualkv::detail
