#include "host/query_plan.h"

#include <algorithm>
#include <numeric>

#include "host/tree_ranges.h"

namespace dualkv::detail {

int64_t visible_keys_of_last_row(const QueryPlan& plan, const QueryTile& tile) {
  int64_t keys = 0;
  for (int32_t r = tile.range_begin; r + 1 < tile.range_end; ++r) keys += plan.ranges[r].end - plan.ranges[r].begin;
  return keys + (tile.q_end - plan.ranges[tile.range_end - 1].begin);
}

QueryPlan build_query_plan(const Layout& layout, int block_m) {
  QueryPlan plan;
  const SegmentIntervals ancestors = ancestor_intervals(layout);
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    const int32_t begin = layout.segment_begin(s);
    const int32_t end = layout.segment_end(s);
    for (int64_t q = begin; q < end; q += block_m) {
      const auto q_begin = static_cast<int32_t>(q);
      const auto q_end = static_cast<int32_t>(std::min<int64_t>(q + block_m, end));
      const auto range_begin = static_cast<int32_t>(plan.ranges.size());
      for (const SegmentInterval* a = ancestors.begin(s); a != ancestors.end(s); ++a) {
        plan.ranges.push_back({layout.segment_begin(a->first), layout.segment_begin(a->end)});
      }
      plan.ranges.push_back({begin, q_end});
      plan.tiles.push_back({q_begin, q_end, range_begin, static_cast<int32_t>(plan.ranges.size())});
    }
  }
  std::vector<int64_t> weight(plan.tiles.size());
  for (size_t i = 0; i < plan.tiles.size(); ++i) weight[i] = visible_keys_of_last_row(plan, plan.tiles[i]);
  std::vector<size_t> order(plan.tiles.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight[a] > weight[b]; });
  std::vector<QueryTile> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(plan.tiles[i]);
  plan.tiles = std::move(sorted);
  return plan;
}

}  // namespace dualkv::detail
