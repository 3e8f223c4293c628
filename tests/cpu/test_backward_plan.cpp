// The backward work plan against the mask definition of include/dualkv/layout.h (tree layouts, the
// two-level ones among them): key tiles cover every token once, their costs are the query rows the
// mask makes a tile visit, the list is in units heaviest first, every key tile's walk visits each
// query that sees it once per head (whole runs of its descendants), the depth-2 layouts plan
// exactly the work they planned before trees (same tiles, same order, same steps), the device plan
// holds it all, and the workspace and plans stay within the memory budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_tree.h"
#include "cpu/tree_spec.h"
#include "cuda/common/key_block_walk.h"
#include "cuda/common/query_walk.h"
#include "dualkv/layout.h"
#include "host/backward_plan.h"
#include "host/query_plan.h"

namespace dualkv::detail {
namespace {

using dualkv_test::BatchSpec;
using dualkv_test::TreeSpec;

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

Layout layout_of(const TreeSpec& tree) { return Layout::from_tree(tree.parents, tree.lengths); }

// Segment starts, recomputed from the lengths alone; one past the last holds T.
std::vector<int64_t> segment_begins(const TreeSpec& tree) {
  std::vector<int64_t> begins{0};
  for (int64_t length : tree.lengths) begins.push_back(begins.back() + length);
  return begins;
}

// Tokens of the `block`-aligned tiles (clipped to their segment) that hold at least one token
// for which `touches(token)` is true.
template <typename Touches>
int64_t rows_of_touched_tiles(const std::vector<int64_t>& begins, int block, Touches touches) {
  int64_t rows = 0;
  for (size_t s = 0; s + 1 < begins.size(); ++s) {
    for (int64_t begin = begins[s]; begin < begins[s + 1]; begin += block) {
      const int64_t end = std::min<int64_t>(begin + block, begins[s + 1]);
      bool touched = false;
      for (int64_t t = begin; t < end && !touched; ++t) touched = touches(t);
      if (touched) rows += end - begin;
    }
  }
  return rows;
}

void expect_key_tiles_cover_every_token_once(const std::vector<TileWork>& tiles, const BackwardRuns& runs,
                                             const TreeSpec& tree, int block) {
  const std::vector<int64_t> begins = segment_begins(tree);
  const std::vector<int64_t> segment_of = dualkv_test::segment_of_tokens(tree);
  std::vector<int> covered(segment_of.size(), 0);
  for (const TileWork& tile : tiles) {
    ASSERT_GE(tile.segment, 0);
    ASSERT_LT(tile.segment, static_cast<int32_t>(tree.lengths.size()));
    ASSERT_GE(tile.begin, begins[tile.segment]);
    ASSERT_LT(tile.begin, begins[tile.segment + 1]);
    EXPECT_EQ((tile.begin - begins[tile.segment]) % block, 0) << "tiles align to their segment's start";
    ASSERT_LT(tile.run_begin, tile.run_end);
    ASSERT_LE(tile.run_end, static_cast<int32_t>(runs.table.size()));
    const QueryRun& own = runs.table[tile.run_begin];
    EXPECT_LE(own.first_segment, tile.segment);
    EXPECT_LT(tile.segment, own.end_segment);
    for (int64_t t = tile.begin; t < std::min<int64_t>(tile.begin + block, begins[tile.segment + 1]); ++t) ++covered[t];
  }
  for (size_t t = 0; t < covered.size(); ++t) EXPECT_EQ(covered[t], 1) << "token " << t;
}

// The runs partition the segments in packed order; every walk's list holds runs of that
// partition, with their segments' tokens, and ends with an empty entry.
void expect_runs_partition_the_segments(const BackwardRuns& runs, const TreeSpec& tree) {
  const std::vector<int64_t> begins = segment_begins(tree);
  const auto num_runs = static_cast<int32_t>(runs.cu_runs.size()) - 1;
  ASSERT_GE(num_runs, 1);
  EXPECT_EQ(runs.cu_runs.front(), 0);
  EXPECT_EQ(runs.cu_runs.back(), static_cast<int32_t>(tree.lengths.size()));
  std::set<std::pair<int32_t, int32_t>> partition;
  for (int32_t r = 0; r < num_runs; ++r) {
    EXPECT_LT(runs.cu_runs[r], runs.cu_runs[r + 1]);
    partition.insert({runs.cu_runs[r], runs.cu_runs[r + 1]});
  }
  ASSERT_EQ(runs.walks.size(), tree.lengths.size());
  for (const RunInterval& walk : runs.walks) {
    ASSERT_LT(walk.begin, walk.end);
    ASSERT_LT(walk.end, static_cast<int32_t>(runs.table.size()));
    for (int32_t r = walk.begin; r < walk.end; ++r) {
      const QueryRun& run = runs.table[r];
      EXPECT_EQ(partition.count({run.first_segment, run.end_segment}), 1u) << "table entry " << r;
      EXPECT_EQ(run.begin, begins[run.first_segment]);
      EXPECT_EQ(run.end, begins[run.end_segment]);
    }
    EXPECT_GE(runs.table[walk.end].begin, runs.table[walk.end].end) << "the walk's list does not end";
  }
}

// The kernels' walk of a key tile (QueryWalk, for KV head 1 of a layout with 2 query heads per KV
// head): heads 2 and 3 in turn, each over the same query tiles, which together hold every query
// that sees a key of the tile exactly once, and only tiles with at least one such query. Tiles
// start at multiples of the block from their run's start; causal steps hold the key tile's own
// queries; every other step's rows from its tile's start to its run's end all see the key tile
// (whole runs: no row of another segment rides along, but past the run's end).
void expect_walk_covers_the_tile_queries(const Layout& layout, const BackwardRuns& runs,
                                         const dualkv_test::oracle::KeyMask& mask, const TileWork& tile,
                                         int64_t key_end, int query_block) {
  const auto sees_tile = [&](int64_t q) {
    for (int64_t k = tile.begin; k < key_end; ++k) {
      if (mask.visible(q, k)) return true;
    }
    return false;
  };
  const QueryWalk walk = QueryWalk::of_key_tile(layout.cu_seqlens().data(), runs.table.data(), tile, 1, 2, query_block);
  std::vector<std::vector<int>> covered(2, std::vector<int>(mask.size(), 0));
  for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) {
    ASSERT_TRUE(step.head == 2 || step.head == 3) << "head " << step.head;
    ASSERT_GE(step.run, tile.run_begin);
    ASSERT_LT(step.run, tile.run_end);
    const QueryRun& run = runs.table[step.run];
    const bool causal = step.causal != 0;
    EXPECT_EQ(causal, step.run == tile.run_begin);
    EXPECT_EQ((step.begin - run.begin) % query_block, 0) << "tile at " << step.begin;
    ASSERT_LE(step.begin, step.rows_begin);
    ASSERT_LT(step.rows_begin, std::min<int64_t>(step.begin + query_block, step.rows_end));
    ASSERT_LE(run.begin, step.begin);
    ASSERT_LE(step.rows_end, run.end);
    if (causal) {
      EXPECT_EQ(step.rows_end, layout.segment_end(tile.segment));
      EXPECT_GE(step.rows_begin, layout.segment_begin(tile.segment));
    } else {
      EXPECT_EQ(step.rows_begin, step.begin) << "a descendant step starts at its tile";
      EXPECT_EQ(step.rows_end, run.end) << "a descendant step runs to its run's end";
    }
    const int64_t end = std::min<int64_t>(step.begin + query_block, step.rows_end);
    bool any = false;
    for (int64_t q = step.rows_begin; q < end; ++q) {
      ++covered[step.head - 2][q];
      const bool sees = sees_tile(q);
      any = any || sees;
      if (!causal) EXPECT_TRUE(sees) << "key tile at " << tile.begin << ": row " << q << " of a descendant step";
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

// Key tile order: a segment's tiles are one unit weighed by its heaviest tile; units heaviest
// first, a unit's tiles contiguous and heaviest first.
void expect_key_tiles_in_units_heaviest_first(const Layout& layout, const BackwardRuns& runs,
                                              const std::vector<TileWork>& tiles, int query_block) {
  const auto rows = [&](const TileWork& t) { return key_tile_query_rows(layout, runs, t, query_block); };
  std::map<int32_t, int64_t> unit_rows;  // segment -> its heaviest tile's rows
  for (const TileWork& t : tiles) unit_rows[t.segment] = std::max(unit_rows[t.segment], rows(t));
  std::set<int32_t> finished_units;
  for (size_t i = 1; i < tiles.size(); ++i) {
    const TileWork &previous = tiles[i - 1], &tile = tiles[i];
    EXPECT_GE(unit_rows[previous.segment], unit_rows[tile.segment]) << "key tile " << i;
    if (tile.segment == previous.segment) {
      EXPECT_GE(rows(previous), rows(tile)) << "key tile " << i;
    } else {
      finished_units.insert(previous.segment);
    }
    EXPECT_EQ(finished_units.count(tile.segment), 0u) << "segment " << tile.segment << " split at key tile " << i;
  }
}

void check_tree(const TreeSpec& tree, int key_block, int query_block) {
  const Layout layout = layout_of(tree);
  const std::vector<int64_t> begins = segment_begins(tree);
  const auto mask = dualkv_test::oracle::tree_mask(tree);
  const BackwardRuns runs = plan_runs(layout);
  expect_runs_partition_the_segments(runs, tree);
  const std::vector<TileWork> key_tiles = plan_key_tiles(layout, runs, key_block, query_block);
  EXPECT_EQ(static_cast<int64_t>(key_tiles.size()), count_tiles(layout, key_block));
  expect_key_tiles_cover_every_token_once(key_tiles, runs, tree, key_block);
  for (const TileWork& tile : key_tiles) {
    const int64_t key_end = std::min<int64_t>(tile.begin + key_block, begins[tile.segment + 1]);
    const int64_t expected = rows_of_touched_tiles(begins, query_block, [&](int64_t q) {
      for (int64_t k = tile.begin; k < key_end; ++k) {
        if (mask.visible(q, k)) return true;
      }
      return false;
    });
    EXPECT_EQ(key_tile_query_rows(layout, runs, tile, query_block), expected) << "key tile at " << tile.begin;
    expect_walk_covers_the_tile_queries(layout, runs, mask, tile, key_end, query_block);
  }
  expect_key_tiles_in_units_heaviest_first(layout, runs, key_tiles, query_block);
}

TEST(BackwardPlan, TilesFollowTheMaskOnFixedBatches) {
  const std::vector<BatchSpec> batches = {
      {{1, {1}}},
      {{17, {5, 1, 70}}, {129, {1}}, {1, {130, 64, 3, 200}}},
      {{300, {100, 77, 1, 129, 64}}},
      {{128, {128, 128}}, {64, {64}}},
  };
  for (const BatchSpec& batch : batches) {
    for (const auto& [key_block, query_block] : kBlockPairs)
      check_tree(dualkv_test::tree_of(batch), key_block, query_block);
  }
}

TEST(BackwardPlan, TilesFollowTheMaskOnRandomTrees) {
  std::mt19937_64 rng(20261202);
  for (int trial = 0; trial < 24; ++trial) {
    const dualkv_test::TreeShape shape = dualkv_test::TreeShape{
        1 + trial % 16, 1 + trial % 3, 1 + trial % 3, trial % 5 == 0 ? 1 : 150, 0.2, trial % 2 == 0};
    const TreeSpec tree = dualkv_test::random_tree(shape, rng);
    check_tree(tree, 32, 16);
    check_tree(tree, 128, 64);
  }
}

// A leaf sibling, then a segment with a child: the two share a run, so the child's key tiles walk
// across a tile that the earlier leaf shares (the tail-slot case of dq_accumulator.h), and the
// root's walk covers both runs.
TEST(BackwardPlan, TilesFollowTheMaskWhereASegmentWithChildrenSharesItsRun) {
  const TreeSpec tree{{-1, 0, 0, 2, 2, -1, 5, 6, 5}, {70, 30, 50, 1, 90, 3, 1, 64, 65}};
  for (const auto& [key_block, query_block] : kBlockPairs) check_tree(tree, key_block, query_block);
  const BackwardRuns runs = plan_runs(layout_of(tree));
  EXPECT_EQ(runs.cu_runs, (std::vector<int32_t>{0, 1, 3, 5, 6, 7, 8, 9}));
}

// The run table holds a list per segment with descendants (as long as their runs) and one per
// run of leaves: thousands of small segments 16 deep plan as many entries as their walks have
// runs, each walk's once.
TEST(BackwardPlan, RunTableHoldsEachWalkOnce) {
  std::mt19937_64 rng(20261203);
  for (const bool depth_first : {true, false}) {
    dualkv_test::TreeShape shape{16, 3, 40, 3, 0.2, depth_first, 3000};
    const TreeSpec tree = dualkv_test::random_tree(shape, rng);
    ASSERT_GT(tree.lengths.size(), 1000u);
    const Layout layout = layout_of(tree);
    ASSERT_EQ(layout.depth(), 16);
    const BackwardRuns runs = plan_runs(layout);
    std::set<int32_t> lists;
    int64_t entries = 0;
    for (const RunInterval& walk : runs.walks) {
      if (lists.insert(walk.begin).second) entries += walk.end - walk.begin + 1;
    }
    EXPECT_EQ(static_cast<int64_t>(runs.table.size()), entries);
  }
}

// The two-level plan as the kernels ran it before tree layouts, written from its description:
// key tiles of each segment in packed order, weighed by the query rows they gather (a prompt
// tile: the prompt's from its own query tile on plus every response; a response tile: its
// response's from its own on), a response's tiles one unit; the walk of a prompt key tile covers
// the prompt's query tiles from its own, then the response run's tiles from the run's first
// token; a response key tile's covers its response's queries in tiles of the response run.
struct LegacyStep {
  int32_t run_first_segment, begin, rows_begin, rows_end, head;
  bool causal;
  friend bool operator==(const LegacyStep& a, const LegacyStep& b) {
    return std::tie(a.run_first_segment, a.begin, a.rows_begin, a.rows_end, a.head, a.causal) ==
           std::tie(b.run_first_segment, b.begin, b.rows_begin, b.rows_end, b.head, b.causal);
  }
};

struct LegacyTile {
  int32_t begin, segment, prompt, group_end;
};

// The two-level planner's key tiles, except that a prompt's tiles are one unit too (weighed by its
// first tile), as every segment's are now: with several groups, prompts no longer interleave.
std::vector<LegacyTile> legacy_key_tiles(const Layout& layout, int key_block, int query_block) {
  std::vector<LegacyTile> tiles;
  const auto rows = [&](const LegacyTile& t) {
    const int32_t segment_begin = layout.segment_begin(t.segment);
    const int64_t first_query = segment_begin + (t.begin - segment_begin) / query_block * query_block;
    const int64_t own = layout.segment_end(t.segment) - first_query;
    if (t.segment != t.prompt) return own;
    return own + layout.segment_begin(t.group_end) - layout.segment_end(t.prompt);
  };
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    for (int32_t s = layout.prompt_segment(g); s < layout.cu_groups()[g + 1]; ++s) {
      for (int32_t b = layout.segment_begin(s); b < layout.segment_end(s); b += key_block) {
        tiles.push_back({b, s, layout.prompt_segment(g), layout.cu_groups()[g + 1]});
      }
    }
  }
  const auto key = [&](const LegacyTile& t) {
    const int64_t unit = rows({layout.segment_begin(t.segment), t.segment, t.prompt, t.group_end});
    return std::tuple(unit, -t.segment, rows(t));
  };
  std::stable_sort(tiles.begin(), tiles.end(),
                   [&](const LegacyTile& a, const LegacyTile& b) { return key(a) > key(b); });
  return tiles;
}

std::vector<LegacyStep> legacy_walk(const Layout& layout, const LegacyTile& tile, int kv_head, int heads_per_kv,
                                    int block) {
  std::vector<LegacyStep> steps;
  const bool prompt = tile.segment == tile.prompt;
  const int32_t run = prompt ? tile.segment : tile.prompt + 1;
  const int32_t run_begin = layout.segment_begin(run);
  const int32_t first = run_begin + (tile.begin - run_begin) / block * block;
  for (int head = kv_head * heads_per_kv; head < (kv_head + 1) * heads_per_kv; ++head) {
    for (int32_t b = first; b < layout.segment_end(tile.segment); b += block) {
      steps.push_back(
          {run, b, std::max(b, layout.segment_begin(tile.segment)), layout.segment_end(tile.segment), head, true});
    }
    if (!prompt) continue;
    const int32_t responses_begin = layout.segment_end(tile.prompt),
                  responses_end = layout.segment_begin(tile.group_end);
    for (int32_t b = responses_begin; b < responses_end; b += block) {
      steps.push_back({tile.prompt + 1, b, b, responses_end, head, false});
    }
  }
  return steps;
}

void expect_the_two_level_plan(const BatchSpec& batch, int key_block, int query_block) {
  const Layout layout = layout_of(batch);
  const BackwardRuns runs = plan_runs(layout);
  const std::vector<TileWork> tiles = plan_key_tiles(layout, runs, key_block, query_block);
  const std::vector<LegacyTile> legacy = legacy_key_tiles(layout, key_block, query_block);
  ASSERT_EQ(tiles.size(), legacy.size());
  for (size_t i = 0; i < tiles.size(); ++i) {
    ASSERT_EQ(tiles[i].begin, legacy[i].begin) << "key tile " << i;
    ASSERT_EQ(tiles[i].segment, legacy[i].segment) << "key tile " << i;
    const QueryWalk walk =
        QueryWalk::of_key_tile(layout.cu_seqlens().data(), runs.table.data(), tiles[i], 1, 3, query_block);
    std::vector<LegacyStep> steps;
    for (QueryStep step = walk.first; !walk.done(step); walk.advance(step)) {
      steps.push_back({runs.table[step.run].first_segment, step.begin, step.rows_begin, step.rows_end, step.head,
                       step.causal != 0});
    }
    ASSERT_TRUE(steps == legacy_walk(layout, legacy[i], 1, 3, query_block)) << "key tile " << i;
  }
  // The deterministic dQ kernel's query tiles: each segment's tiles, heaviest first by the keys
  // they see, a response tile reading its prompt and then its own segment.
  const QueryPlan dq_plan = build_query_plan(layout, query_block);
  struct LegacyQueryTile {
    int32_t begin, end, segment;
    int64_t keys;
  };
  std::vector<LegacyQueryTile> query_tiles;
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    for (int32_t s = layout.prompt_segment(g); s < layout.cu_groups()[g + 1]; ++s) {
      for (int32_t b = layout.segment_begin(s); b < layout.segment_end(s); b += query_block) {
        const int32_t end = std::min(b + query_block, layout.segment_end(s));
        const int64_t own = end - layout.segment_begin(s);
        query_tiles.push_back({b, end, s, s == layout.prompt_segment(g) ? own : own + layout.prompt_length(g)});
      }
    }
  }
  std::stable_sort(query_tiles.begin(), query_tiles.end(),
                   [](const LegacyQueryTile& a, const LegacyQueryTile& b) { return a.keys > b.keys; });
  ASSERT_EQ(dq_plan.tiles.size(), query_tiles.size());
  for (size_t i = 0; i < query_tiles.size(); ++i) {
    const QueryTile& tile = dq_plan.tiles[i];
    ASSERT_EQ(tile.q_begin, query_tiles[i].begin) << "query tile " << i;
    ASSERT_EQ(tile.q_end, query_tiles[i].end) << "query tile " << i;
    std::vector<std::pair<int32_t, int32_t>> ranges, expected;
    for (int32_t r = tile.range_begin; r < tile.range_end; ++r)
      ranges.emplace_back(dq_plan.ranges[r].begin, dq_plan.ranges[r].end);
    const int32_t segment = query_tiles[i].segment;
    const int32_t group =
        static_cast<int32_t>(std::upper_bound(layout.cu_groups().begin(), layout.cu_groups().end(), segment) -
                             layout.cu_groups().begin()) -
        1;
    if (segment != layout.prompt_segment(group))
      expected.emplace_back(layout.prompt_begin(group), layout.prompt_end(group));
    expected.emplace_back(layout.segment_begin(segment), tile.q_end);
    ASSERT_EQ(ranges, expected) << "query tile " << i;
  }
}

TEST(BackwardPlan, TwoLevelLayoutsPlanTheWorkTheyPlannedBeforeTrees) {
  const std::vector<BatchSpec> batches = {
      {{1, {1}}},
      {{17, {5, 1, 70}}, {129, {1}}, {1, {130, 64, 3, 200}}},
      {{300, {100, 77, 1, 129, 64}}},
      {{4096, std::vector<int64_t>(28, 2048)}},
      {{1, std::vector<int64_t>(200, 1)}},
  };
  for (const BatchSpec& batch : batches) {
    for (const auto& [key_block, query_block] : kBlockPairs) expect_the_two_level_plan(batch, key_block, query_block);
  }
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int64_t> groups(1, 3), responses(1, 5), length(1, 150);
  for (int trial = 0; trial < 20; ++trial) {
    BatchSpec batch;
    for (int64_t g = groups(rng); g > 0; --g) {
      dualkv_test::GroupLengths group{length(rng), {}};
      for (int64_t r = responses(rng); r > 0; --r) group.responses.push_back(length(rng));
      batch.push_back(group);
    }
    expect_the_two_level_plan(batch, 128, 64);
    expect_the_two_level_plan(batch, 32, 16);
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
// A tree's plans hold a range per ancestor run of each query tile: a few bytes per token at the
// segment lengths of multi-turn rollouts (the deep tree below), more for trees of one-token
// segments many levels deep, which no rollout has.
TEST(BackwardPlan, WorkspaceAndPlansStayWithinHalfTheTensors) {
  std::mt19937_64 rng(20261204);
  dualkv_test::TreeShape deep{16, 2, 4, 64, 0.0, true, 400};
  TreeSpec deep_tree = dualkv_test::random_tree(deep, rng);
  for (int64_t& length : deep_tree.lengths) length += 15;
  const std::vector<Layout> layouts = {
      layout_of(BatchSpec{{1, {1}}}),
      layout_of(BatchSpec{{1, std::vector<int64_t>(200, 1)}}),  // one-token segments: the most tiles per token
      layout_of(BatchSpec{{4096, std::vector<int64_t>(28, 2048)}}),
      layout_of(BatchSpec{{17, {5, 1, 70}}, {129, {1}}}),
      layout_of(deep_tree),
  };
  for (const Layout& layout : layouts) {
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
                                        deterministic, /*stores_lse_log2=*/true, /*walk_progress_slots=*/0);
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
          // Hopper (lse_log2) with paced walks: a slot per (64-key tile, KV head) CTA of 2 KV heads.
          const int64_t walk_progress_slots = stores_lse_log2 ? (tokens + 63) / 64 * 2 : 0;
          const BackwardWorkspace ws = plan_backward_workspace(tokens, dq_accum_rows, heads, head_dim, deterministic,
                                                               stores_lse_log2, walk_progress_slots);
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
          EXPECT_EQ(ws.walk_progress_slots, walk_progress_slots);
          if (walk_progress_slots > 0) {
            regions.push_back({ws.walk_progress_offset, walk_progress_slots * sizeof(uint64_t)});
          }
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
// run offsets and table.
TEST(BackwardPlan, PlanImageHoldsOffsetsTilesAndRuns) {
  for (const Layout& layout : {layout_of(BatchSpec{{17, {5, 1, 70}}, {129, {1}}}),
                               layout_of(TreeSpec{{-1, 0, -1, 0, 1, 2}, {3, 70, 2, 5, 1, 9}})}) {
    for (int dq_query_block : {0, 64}) {
      const PlanImage image = backward_plan_image(layout, 128, 64, dq_query_block);
      ASSERT_EQ(image.regions().size(), 6u);
      const auto expect_region = [&](size_t index, const auto& items) {
        ASSERT_EQ(image.regions()[index].count, static_cast<int64_t>(items.size())) << "region " << index;
        if (items.empty()) return;
        EXPECT_EQ(std::memcmp(image.bytes().data() + image.regions()[index].offset, items.data(),
                              items.size() * sizeof(items[0])),
                  0)
            << "region " << index;
      };
      const BackwardRuns runs = plan_runs(layout);
      const QueryPlan dq_plan = dq_query_block > 0 ? build_query_plan(layout, dq_query_block) : QueryPlan{};
      expect_region(kCuSeqlensRegion, layout.cu_seqlens());
      expect_region(kKeyTilesRegion, plan_key_tiles(layout, runs, 128, 64));
      expect_region(kQueryTilesRegion, dq_plan.tiles);
      expect_region(kQueryKeyRangesRegion, dq_plan.ranges);
      expect_region(kCuRunsRegion, runs.cu_runs);
      expect_region(kRunTableRegion, runs.table);
    }
  }
}

}  // namespace
}  // namespace dualkv::detail
