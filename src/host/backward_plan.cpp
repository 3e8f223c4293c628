#include "host/backward_plan.h"

#include <algorithm>
#include <tuple>

#include "host/tree_ranges.h"

namespace dualkv::detail {
namespace {

// 16 bytes: the widest access any kernel makes to a workspace region (float4 on dq_accum).
constexpr size_t kRegionAlignment = 16;

size_t align_up(size_t bytes) { return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }

// The first token of the `block`-aligned tile of segment `segment` that holds `token`.
int32_t tile_begin_of(const Layout& layout, int32_t segment, int32_t token, int block) {
  const int32_t segment_begin = layout.segment_begin(segment);
  return segment_begin + (token - segment_begin) / block * block;
}

}  // namespace

BackwardRuns plan_runs(const Layout& layout) {
  const int32_t segments = layout.num_segments();
  const SegmentIntervals descendants = descendant_intervals(layout);
  std::vector<bool> starts_run(static_cast<size_t>(segments) + 1, false);
  starts_run[0] = starts_run[static_cast<size_t>(segments)] = true;
  for (int32_t s = 0; s < segments; ++s) {
    if (layout.parent(s) < 0) starts_run[static_cast<size_t>(s)] = true;
    for (const SegmentInterval* d = descendants.begin(s); d != descendants.end(s); ++d) {
      starts_run[static_cast<size_t>(d->first)] = starts_run[static_cast<size_t>(d->end)] = true;
    }
  }
  BackwardRuns runs;
  // run_at[b]: the run starting at segment b (for run boundaries b, R at b == S); run_of[s]: the
  // run holding segment s.
  std::vector<int32_t> run_at(static_cast<size_t>(segments) + 1, -1), run_of(static_cast<size_t>(segments));
  for (int32_t s = 0; s <= segments; ++s) {
    if (starts_run[static_cast<size_t>(s)]) {
      run_at[static_cast<size_t>(s)] = static_cast<int32_t>(runs.cu_runs.size());
      runs.cu_runs.push_back(s);
    }
    if (s < segments) run_of[static_cast<size_t>(s)] = static_cast<int32_t>(runs.cu_runs.size()) - 1;
  }
  const auto num_runs = static_cast<int32_t>(runs.cu_runs.size()) - 1;
  const auto run_entry = [&](int32_t r) {
    const int32_t first = runs.cu_runs[static_cast<size_t>(r)], end = runs.cu_runs[static_cast<size_t>(r) + 1];
    return QueryRun{first, end, layout.segment_begin(first), layout.segment_begin(end)};
  };
  // Every walk's list ends with an empty entry. A leaf's walk is its run alone: the leaves of a
  // run share one list.
  std::vector<int32_t> leaf_walk_of_run(static_cast<size_t>(num_runs), -1);
  runs.walks.reserve(static_cast<size_t>(segments));
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t own = run_of[static_cast<size_t>(s)];
    const bool leaf = descendants.count(s) == 0;
    if (leaf && leaf_walk_of_run[static_cast<size_t>(own)] >= 0) {
      const int32_t begin = leaf_walk_of_run[static_cast<size_t>(own)];
      runs.walks.push_back({begin, begin + 1});
      continue;
    }
    const auto begin = static_cast<int32_t>(runs.table.size());
    runs.table.push_back(run_entry(own));
    for (const SegmentInterval* d = descendants.begin(s); d != descendants.end(s); ++d) {
      for (int32_t r = run_at[static_cast<size_t>(d->first)]; r < run_at[static_cast<size_t>(d->end)]; ++r) {
        runs.table.push_back(run_entry(r));
      }
    }
    runs.walks.push_back({begin, static_cast<int32_t>(runs.table.size())});
    runs.table.push_back(QueryRun{-1, -1, 0, 0});
    if (leaf) leaf_walk_of_run[static_cast<size_t>(own)] = begin;
  }
  return runs;
}

namespace {

// Queries of the walk's runs after its first: the key tile's descendants.
int64_t descendant_rows(const BackwardRuns& runs, int32_t run_begin, int32_t run_end) {
  int64_t rows = 0;
  for (int32_t r = run_begin + 1; r < run_end; ++r) {
    const QueryRun& run = runs.table[static_cast<size_t>(r)];
    rows += run.end - run.begin;
  }
  return rows;
}

int64_t own_rows(const Layout& layout, int32_t segment, int32_t begin, int query_block) {
  return layout.segment_end(segment) - tile_begin_of(layout, segment, begin, query_block);
}

}  // namespace

int64_t key_tile_query_rows(const Layout& layout, const BackwardRuns& runs, const TileWork& tile, int query_block) {
  return own_rows(layout, tile.segment, tile.begin, query_block) + descendant_rows(runs, tile.run_begin, tile.run_end);
}

std::vector<TileWork> plan_key_tiles(const Layout& layout, const BackwardRuns& runs, int key_block, int query_block) {
  // Each tile with its sort key: (its unit's rows, -segment, its rows). A segment's key tiles are
  // one unit, weighed by its heaviest (first) tile: they read the same query rows and add into the
  // same dQ rows, so running them together keeps those rows in L2 (roots too: several prompts or
  // trees of alike weight would otherwise interleave tile by tile).
  struct Keyed {
    TileWork tile;
    std::tuple<int64_t, int32_t, int64_t> key;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(static_cast<size_t>(count_tiles(layout, key_block)));
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    const RunInterval walk = runs.walks[static_cast<size_t>(s)];
    const int64_t shared_rows = descendant_rows(runs, walk.begin, walk.end);
    const int64_t unit_rows = own_rows(layout, s, layout.segment_begin(s), query_block) + shared_rows;
    for (int64_t begin = layout.segment_begin(s); begin < layout.segment_end(s); begin += key_block) {
      const TileWork tile{static_cast<int32_t>(begin), s, walk.begin, walk.end};
      const int64_t rows = own_rows(layout, s, tile.begin, query_block) + shared_rows;
      keyed.push_back({tile, {unit_rows, -s, rows}});
    }
  }
  // Units heaviest first; a unit's tiles together (segment ascending), heaviest first inside.
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) { return a.key > b.key; });
  std::vector<TileWork> tiles;
  tiles.reserve(keyed.size());
  for (const Keyed& k : keyed) tiles.push_back(k.tile);
  return tiles;
}

int64_t count_tiles(const Layout& layout, int block) {
  int64_t tiles = 0;
  for (int32_t s = 0; s < layout.num_segments(); ++s) tiles += (int64_t{layout.segment_length(s)} + block - 1) / block;
  return tiles;
}

PlanImage backward_plan_image(const Layout& layout, int key_block, int query_block, int dq_query_block) {
  const BackwardRuns runs = plan_runs(layout);
  const QueryPlan dq_plan = dq_query_block > 0 ? build_query_plan(layout, dq_query_block) : QueryPlan{};
  PlanImage image;
  image.append(layout.cu_seqlens());
  image.append(plan_key_tiles(layout, runs, key_block, query_block));
  image.append(dq_plan.tiles);
  image.append(dq_plan.ranges);
  image.append(runs.cu_runs);
  image.append(runs.table);
  return image;
}

BackwardWorkspace plan_backward_workspace(int64_t tokens, int64_t dq_accum_rows, int64_t heads, int64_t head_dim,
                                          bool deterministic, bool stores_lse_log2, int64_t walk_progress_slots) {
  BackwardWorkspace ws;
  ws.has_dq_accum = !deterministic;
  ws.has_lse_log2 = stores_lse_log2;
  ws.stats_row_stride = (tokens + 3) / 4 * 4;
  const auto stats_bytes = static_cast<size_t>(heads * ws.stats_row_stride) * sizeof(float);
  size_t offset = 0;
  ws.dq_accum_offset = offset;
  if (ws.has_dq_accum) offset += align_up(static_cast<size_t>(dq_accum_rows * heads * head_dim) * sizeof(float));
  ws.delta_offset = offset;
  offset += align_up(stats_bytes);
  ws.lse_log2_offset = offset;
  if (ws.has_lse_log2) offset += align_up(stats_bytes + kStatsReadSlack * sizeof(float));
  ws.walk_progress_offset = offset;
  ws.walk_progress_slots = walk_progress_slots;
  offset += align_up(static_cast<size_t>(walk_progress_slots) * sizeof(uint64_t));
  ws.total_bytes = offset;
  return ws;
}

}  // namespace dualkv::detail
