// The forward work plan and the key-block walk every kernel family runs over it, against the mask
// definition of include/dualkv/layout.h: every query row in exactly one tile; walking a tile's blocks and
// applying each block's mask leaves exactly the keys each row sees, each once; unmasked blocks
// hold only visible pairs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "cuda/common/key_block_walk.h"
#include "dualkv/layout.h"
#include "host/query_plan.h"

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

void check_plan(const Layout& layout, int block_m) {
  SCOPED_TRACE("block_m " + std::to_string(block_m));
  const TokenOwners owners = owners_of(layout);
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
    const int32_t segment = owners.segment[tile.q_begin];
    EXPECT_EQ(owners.segment[tile.q_end - 1], segment) << "tile straddles segments";
    // Only a segment's last tile is short; the causal range is the tile's own segment.
    const KeyRange own = plan.ranges[tile.range_end - 1];
    EXPECT_EQ(own.begin, layout.segment_begin(segment));
    EXPECT_EQ(own.end, tile.q_end);
    EXPECT_EQ((tile.q_begin - own.begin) % block_m, 0);
    for (int32_t r = tile.range_begin + 1; r < tile.range_end; ++r) {
      EXPECT_LE(plan.ranges[r - 1].end, plan.ranges[r].begin) << "ranges overlap or are out of order";
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
  check_plan(Layout::from_lengths({1}, {{1}}), 128);
  check_plan(Layout::from_lengths({1}, {{1, 1, 1}}), 64);
}

TEST(QueryPlan, SegmentsAroundBlockBoundaries) {
  const Layout layout = Layout::from_lengths({17, 129, 128}, {{1, 128, 129}, {127, 2}, {256, 1, 64}});
  for (int block_m : {16, 64, 128}) check_plan(layout, block_m);
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
    check_plan(Layout::from_lengths(prompts, responses), 64 << (trial % 2));
  }
}

TEST(QueryPlan, ResponseToPromptRectangleIsUnmasked) {
  // P and R multiples of the block: a response tile's prompt blocks and every own-segment block
  // before its diagonal run without a mask.
  const Layout layout = Layout::from_lengths({512}, {{256, 256}});
  const QueryPlan plan = build_query_plan(layout, 128);
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
