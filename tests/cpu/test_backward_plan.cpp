// The backward work plan against the mask definition of include/dualkv/layout.h: key tiles and query
// tiles cover every token once, their costs are the query rows / key rows the mask makes a tile
// visit, both lists are heaviest first, the device plan holds them, and the workspace and plans
// stay within the memory budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_dense_mask.h"
#include "cuda/common/query_walk.h"
#include "dualkv/layout.h"
#include "host/backward_plan.h"
#include "host/query_plan.h"

namespace dualkv::detail {
namespace {

using dualkv_test::BatchSpec;

// (key block, query block) pairs the kernels plan with: the KV-major kernel's and the
// deterministic dQ kernel's, at the sizes of the sm80 tile shapes and smaller ones.
constexpr std::pair<int, int> kBlockPairs[] = {{128, 64}, {128, 32}, {64, 64}, {32, 16}};

Layout layout_of(const BatchSpec& batch) {
  std::vector<int64_t> prompts;
  std::vector<std::vector<int64_t>> responses;
  for (const auto& group : batch) {
    prompts.push_back(group.prompt);
    responses.push_back(group.responses);
  }
  return Layout::from_lengths(prompts, responses);
}

// Segments in packed order, recomputed from the lengths alone.
struct Segments {
  std::vector<int64_t> begin;  // one past the last segment holds T
  std::vector<int32_t> of_token;
  std::vector<int32_t> prompt_of;     // per segment: its group's prompt segment
  std::vector<int32_t> group_end_of;  // per segment: one past its group's last segment
};

Segments segments_of(const BatchSpec& batch) {
  Segments s;
  int64_t next = 0;
  auto add = [&](int64_t length, int32_t prompt, int32_t group_end) {
    s.begin.push_back(next);
    s.prompt_of.push_back(prompt);
    s.group_end_of.push_back(group_end);
    for (int64_t i = 0; i < length; ++i) s.of_token.push_back(static_cast<int32_t>(s.begin.size() - 1));
    next += length;
  };
  for (const auto& group : batch) {
    const auto prompt = static_cast<int32_t>(s.begin.size());
    const auto group_end = prompt + 1 + static_cast<int32_t>(group.responses.size());
    add(group.prompt, prompt, group_end);
    for (int64_t length : group.responses) add(length, prompt, group_end);
  }
  s.begin.push_back(next);
  return s;
}

// Tokens of the `block`-aligned tiles (clipped to their segment) that hold at least one token
// for which `touches(token)` is true.
template <typename Touches>
int64_t rows_of_touched_tiles(const Segments& segments, int block, Touches touches) {
  int64_t rows = 0;
  for (size_t s = 0; s + 1 < segments.begin.size(); ++s) {
    for (int64_t begin = segments.begin[s]; begin < segments.begin[s + 1]; begin += block) {
      const int64_t end = std::min<int64_t>(begin + block, segments.begin[s + 1]);
      bool touched = false;
      for (int64_t t = begin; t < end && !touched; ++t) touched = touches(t);
      if (touched) rows += end - begin;
    }
  }
  return rows;
}

void expect_tiles_cover_every_token_once(const std::vector<TileWork>& tiles, const Segments& segments, int block) {
  std::vector<int> covered(segments.of_token.size(), 0);
  for (const TileWork& tile : tiles) {
    const int64_t segment_begin = segments.begin[tile.segment];
    const int64_t segment_end = segments.begin[tile.segment + 1];
    ASSERT_GE(tile.begin, segment_begin);
    ASSERT_LT(tile.begin, segment_end);
    EXPECT_EQ((tile.begin - segment_begin) % block, 0) << "tiles align to their segment's start";
    EXPECT_EQ(segments.of_token[tile.begin], tile.segment);
    EXPECT_EQ(tile.prompt_segment, segments.prompt_of[tile.segment]);
    EXPECT_EQ(tile.group_end_segment, segments.group_end_of[tile.segment]);
    for (int64_t t = tile.begin; t < std::min<int64_t>(tile.begin + block, segment_end); ++t) ++covered[t];
  }
  for (size_t t = 0; t < covered.size(); ++t) EXPECT_EQ(covered[t], 1) << "token " << t;
}

// The kernels' walk of a key tile (QueryWalk, for KV head 1 of a layout with 2 query heads per KV
// head): heads 2 and 3 in turn, each over the same query tiles, which together hold every query
// that sees a key of the tile exactly once, and only tiles with at least one such query. Tiles
// start at multiples of the block from their run's start (the group's prompt, or its first
// response), rows outside a step's queries are in the run, and a step is causal exactly when its
// queries are in the key tile's segment.
template <typename Mask>
void expect_walk_covers_the_tile_queries(const Layout& layout, const Mask& mask, const TileWork& tile, int64_t key_end,
                                         int query_block) {
  const auto sees_tile = [&](int64_t q) {
    for (int64_t k = tile.begin; k < key_end; ++k) {
      if (mask.visible(q, k)) return true;
    }
    return false;
  };
  const QueryWalk walk = QueryWalk::of_key_tile(layout.cu_seqlens().data(), tile, 1, 2, query_block);
  std::vector<std::vector<int>> covered(2, std::vector<int>(mask.size(), 0));
  const std::vector<int32_t>& offsets = layout.cu_seqlens();
  for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) {
    ASSERT_TRUE(step.head == 2 || step.head == 3) << "head " << step.head;
    const bool response_run = step.run != tile.prompt_segment;
    ASSERT_EQ(step.run, response_run ? tile.prompt_segment + 1 : tile.prompt_segment);
    const int64_t run_begin = offsets[step.run];
    const int64_t run_end = offsets[response_run ? tile.group_end_segment : tile.prompt_segment + 1];
    EXPECT_EQ((step.begin - run_begin) % query_block, 0) << "tile at " << step.begin;
    ASSERT_LE(step.begin, step.rows_begin);
    ASSERT_LT(step.rows_begin, std::min<int64_t>(step.begin + query_block, step.rows_end));
    ASSERT_LE(run_begin, step.begin);
    ASSERT_LE(step.rows_end, run_end);
    EXPECT_EQ(step.causal, response_run == (tile.segment != tile.prompt_segment));
    const int64_t end = std::min<int64_t>(step.begin + query_block, step.rows_end);
    bool any = false;
    for (int64_t q = step.rows_begin; q < end; ++q) {
      ++covered[step.head - 2][q];
      any = any || sees_tile(q);
    }
    EXPECT_TRUE(any) << "key tile at " << tile.begin << ": a step at " << step.begin << " sees none of its keys";
  }
  for (int64_t q = 0; q < mask.size(); ++q) {
    for (int head = 0; head < 2; ++head) {
      if (sees_tile(q)) EXPECT_EQ(covered[head][q], 1) << "key tile at " << tile.begin << ", query " << q;
      EXPECT_LE(covered[head][q], 1) << "key tile at " << tile.begin << ", query " << q;
    }
  }
}

// Key tile order: a prompt tile is a unit of its own, a response's tiles are one unit weighed by
// its heaviest tile; units heaviest first, a response's tiles contiguous and heaviest first.
void expect_key_tiles_in_units_heaviest_first(const Layout& layout, const std::vector<TileWork>& tiles,
                                              int query_block) {
  const auto rows = [&](const TileWork& t) { return key_tile_query_rows(layout, t, query_block); };
  std::map<int32_t, int64_t> response_rows;  // segment -> its heaviest tile's rows
  for (const TileWork& t : tiles) {
    if (t.segment != t.prompt_segment) response_rows[t.segment] = std::max(response_rows[t.segment], rows(t));
  }
  const auto unit = [&](const TileWork& t) {
    return t.segment == t.prompt_segment ? rows(t) : response_rows[t.segment];
  };
  std::set<int32_t> finished_responses;
  for (size_t i = 1; i < tiles.size(); ++i) {
    const TileWork &previous = tiles[i - 1], &tile = tiles[i];
    EXPECT_GE(unit(previous), unit(tile)) << "key tile " << i;
    if (tile.segment == previous.segment && tile.segment != tile.prompt_segment) {
      EXPECT_GE(rows(previous), rows(tile)) << "key tile " << i;
    } else if (previous.segment != previous.prompt_segment) {
      finished_responses.insert(previous.segment);
    }
    EXPECT_EQ(finished_responses.count(tile.segment), 0u) << "response " << tile.segment << " split at key tile " << i;
  }
}

void check_batch(const BatchSpec& batch, int key_block, int query_block) {
  const Layout layout = layout_of(batch);
  const Segments segments = segments_of(batch);
  const auto mask = dualkv_test::oracle::packed_mask(batch);
  const int64_t tokens = mask.size();

  const std::vector<TileWork> key_tiles = plan_key_tiles(layout, key_block, query_block);
  EXPECT_EQ(static_cast<int64_t>(key_tiles.size()), count_tiles(layout, key_block));
  expect_tiles_cover_every_token_once(key_tiles, segments, key_block);
  for (size_t i = 0; i < key_tiles.size(); ++i) {
    const TileWork& tile = key_tiles[i];
    const int64_t key_end = std::min<int64_t>(tile.begin + key_block, segments.begin[tile.segment + 1]);
    const int64_t expected = rows_of_touched_tiles(segments, query_block, [&](int64_t q) {
      for (int64_t k = tile.begin; k < key_end; ++k) {
        if (mask.visible(q, k)) return true;
      }
      return false;
    });
    EXPECT_EQ(key_tile_query_rows(layout, tile, query_block), expected) << "key tile at " << tile.begin;
    expect_walk_covers_the_tile_queries(layout, mask, tile, key_end, query_block);
  }
  expect_key_tiles_in_units_heaviest_first(layout, key_tiles, query_block);

  const std::vector<TileWork> query_tiles = plan_query_tiles(layout, query_block);
  EXPECT_EQ(static_cast<int64_t>(query_tiles.size()), count_tiles(layout, query_block));
  expect_tiles_cover_every_token_once(query_tiles, segments, query_block);
  for (size_t i = 0; i < query_tiles.size(); ++i) {
    const TileWork& tile = query_tiles[i];
    const int64_t query_end = std::min<int64_t>(tile.begin + query_block, segments.begin[tile.segment + 1]);
    int64_t seen_keys = 0;
    for (int64_t k = 0; k < tokens; ++k) {
      bool seen = false;
      for (int64_t q = tile.begin; q < query_end && !seen; ++q) seen = mask.visible(q, k);
      seen_keys += seen;
    }
    EXPECT_EQ(query_tile_key_rows(layout, tile, query_block), seen_keys) << "query tile at " << tile.begin;
    if (i > 0) {
      EXPECT_GE(query_tile_key_rows(layout, query_tiles[i - 1], query_block),
                query_tile_key_rows(layout, tile, query_block));
    }
  }
}

TEST(BackwardPlan, TilesFollowTheMaskOnFixedBatches) {
  const std::vector<BatchSpec> batches = {
      {{1, {1}}},
      {{17, {5, 1, 70}}, {129, {1}}, {1, {130, 64, 3, 200}}},
      {{300, {100, 77, 1, 129, 64}}},
      {{128, {128, 128}}, {64, {64}}},
  };
  for (const BatchSpec& batch : batches) {
    for (const auto& [key_block, query_block] : kBlockPairs) check_batch(batch, key_block, query_block);
  }
}

TEST(BackwardPlan, TilesFollowTheMaskOnRandomBatches) {
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int64_t> groups(1, 3), responses(1, 5), length(1, 150);
  for (int trial = 0; trial < 20; ++trial) {
    BatchSpec batch;
    for (int64_t g = groups(rng); g > 0; --g) {
      dualkv_test::GroupLengths group{length(rng), {}};
      for (int64_t r = responses(rng); r > 0; --r) group.responses.push_back(length(rng));
      batch.push_back(group);
    }
    check_batch(batch, 32, 16);
    check_batch(batch, 128, 64);
  }
}

// The memory bound: peak memory <= 1.5x the bytes of Q, K, V, O, dO, dQ, dK, dV, so the
// workspace and the plans kept with the layout (both directions') may add at most half of them,
// besides what does not grow with the tokens: the Hopper kernel's read slack (kStatsReadSlack
// floats), the stats rows' padding to 4 tokens (under 3 floats per head in each of 2 regions) and
// the lse_log2 region's alignment.
// Per token the workspace holds H (head_dim + 2) floats (dQ accumulator, D, lse_log2) against
// half the tensors' 4 (H + Hk) head_dim bytes, so the bound holds while H / Hk < head_dim / 2
// (less the plans' few bytes per token); checked here for the group sizes up to 32 below that.
TEST(BackwardPlan, WorkspaceAndPlansStayWithinHalfTheTensors) {
  const std::vector<BatchSpec> batches = {
      {{1, {1}}},
      {{1, std::vector<int64_t>(200, 1)}},  // one-token segments: the most tiles per token
      {{4096, std::vector<int64_t>(28, 2048)}},
      {{17, {5, 1, 70}}, {129, {1}}},
  };
  for (const BatchSpec& batch : batches) {
    const Layout layout = layout_of(batch);
    const double tokens = layout.total_tokens();
    const QueryPlan forward_plan = build_query_plan(layout, 128);
    const double forward_plan_bytes =
        forward_plan.tiles.size() * sizeof(QueryTile) + forward_plan.ranges.size() * sizeof(KeyRange);
    for (const int64_t head_dim : {64, 128}) {
      for (int64_t kv_heads : {1, 2, 8}) {
        for (int64_t group_size : {1, 4, 8, 16, 32}) {
          if (2 * group_size >= head_dim) continue;
          const int64_t heads = kv_heads * group_size;
          const double tensor_bytes = tokens * (4.0 * heads + 4.0 * kv_heads) * head_dim * 2 /*16-bit*/;
          for (bool deterministic : {false, true}) {
            const BackwardWorkspace ws =
                plan_backward_workspace(layout.total_tokens(), /*dq_accum_rows=*/layout.total_tokens(), heads, head_dim,
                                        deterministic, /*stores_lse_log2=*/true);
            const double plan_bytes =
                forward_plan_bytes + backward_plan_image(layout, 128, 64, deterministic ? 64 : 0).bytes().size();
            const double fixed_bytes = (kStatsReadSlack + 2 * 3 * heads) * sizeof(float) + 16;
            EXPECT_LE(ws.total_bytes + plan_bytes, 0.5 * tensor_bytes + fixed_bytes)
                << "H=" << heads << " Hk=" << kv_heads << " d=" << head_dim;
          }
        }
      }
    }
  }
}

TEST(BackwardPlan, WorkspaceRegionsAreAlignedAndDisjoint) {
  const int64_t heads = 4, head_dim = 64;
  for (int64_t tokens : {1, 222, 223, 224}) {
    // The portable family's one row per token, and the Hopper family's padded rows.
    for (const int64_t dq_accum_rows : {tokens, tokens + 3 * 64 + 5}) {
      for (bool deterministic : {false, true}) {
        for (bool stores_lse_log2 : {false, true}) {
          const BackwardWorkspace ws =
              plan_backward_workspace(tokens, dq_accum_rows, heads, head_dim, deterministic, stores_lse_log2);
          EXPECT_EQ(ws.has_dq_accum, !deterministic);
          EXPECT_EQ(ws.has_lse_log2, stores_lse_log2);
          // Rows of 16-byte multiples that hold every token: TMA needs aligned row starts.
          EXPECT_GE(ws.stats_row_stride, tokens);
          EXPECT_EQ(ws.stats_row_stride % 4, 0);
          EXPECT_LT(ws.stats_row_stride, tokens + 4);
          struct Region {
            size_t offset, bytes;
          };
          const size_t stats_bytes = heads * ws.stats_row_stride * sizeof(float);
          std::vector<Region> regions{{ws.delta_offset, stats_bytes}};
          if (stores_lse_log2) regions.push_back({ws.lse_log2_offset, stats_bytes + kStatsReadSlack * sizeof(float)});
          if (!deterministic) regions.push_back({ws.dq_accum_offset, dq_accum_rows * heads * head_dim * sizeof(float)});
          for (size_t i = 0; i < regions.size(); ++i) {
            EXPECT_EQ(regions[i].offset % 16, 0u);
            EXPECT_LE(regions[i].offset + regions[i].bytes, ws.total_bytes);
            for (size_t j = 0; j < i; ++j) {
              EXPECT_TRUE(regions[i].offset + regions[i].bytes <= regions[j].offset ||
                          regions[j].offset + regions[j].bytes <= regions[i].offset)
                  << "regions " << j << " and " << i << " overlap";
            }
          }
        }
      }
    }
  }
}

// The device plan holds the layout's offsets, exactly the tile lists the planners return, and the
// group offsets.
TEST(BackwardPlan, PlanImageHoldsOffsetsAndTiles) {
  const Layout layout = layout_of({{17, {5, 1, 70}}, {129, {1}}});
  for (int dq_query_block : {0, 64}) {
    const PlanImage image = backward_plan_image(layout, 128, 64, dq_query_block);
    ASSERT_EQ(image.regions().size(), 4u);
    const auto region = [&](size_t index) { return image.bytes().data() + image.regions()[index].offset; };
    const std::vector<int32_t>& offsets = layout.cu_seqlens();
    ASSERT_EQ(image.regions()[kCuSeqlensRegion].count, static_cast<int64_t>(offsets.size()));
    EXPECT_EQ(std::memcmp(region(kCuSeqlensRegion), offsets.data(), offsets.size() * sizeof(int32_t)), 0);
    const std::vector<TileWork> key_tiles = plan_key_tiles(layout, 128, 64);
    ASSERT_EQ(image.regions()[kKeyTilesRegion].count, static_cast<int64_t>(key_tiles.size()));
    EXPECT_EQ(std::memcmp(region(kKeyTilesRegion), key_tiles.data(), key_tiles.size() * sizeof(TileWork)), 0);
    const std::vector<TileWork> query_tiles =
        dq_query_block > 0 ? plan_query_tiles(layout, dq_query_block) : std::vector<TileWork>{};
    ASSERT_EQ(image.regions()[kQueryTilesRegion].count, static_cast<int64_t>(query_tiles.size()));
    if (!query_tiles.empty()) {
      EXPECT_EQ(std::memcmp(region(kQueryTilesRegion), query_tiles.data(), query_tiles.size() * sizeof(TileWork)), 0);
    }
    const std::vector<int32_t>& groups = layout.cu_groups();
    ASSERT_EQ(image.regions()[kCuGroupsRegion].count, static_cast<int64_t>(groups.size()));
    EXPECT_EQ(std::memcmp(region(kCuGroupsRegion), groups.data(), groups.size() * sizeof(int32_t)), 0);
  }
}

}  // namespace
}  // namespace dualkv::detail
