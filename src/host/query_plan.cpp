#include "host/query_plan.h"

#include <algorithm>
#include <numeric>

namespace dualkv::detail {

int64_t visible_keys_of_last_row(const QueryPlan& plan, const QueryTile& tile) {
  int64_t keys = 0;
  for (int32_t r = tile.range_begin; r + 1 < tile.range_end; ++r) keys += plan.ranges[r].end - plan.ranges[r].begin;
  return keys + (tile.q_end - plan.ranges[tile.range_end - 1].begin);
}

QueryPlan build_query_plan(const Layout& layout, int block_m) {
  QueryPlan plan;
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    const int32_t prompt = layout.prompt_segment(g);
    for (int32_t s = prompt; s < layout.cu_groups()[g + 1]; ++s) {
      const int32_t begin = layout.segment_begin(s);
      const int32_t end = layout.segment_end(s);
      for (int64_t q = begin; q < end; q += block_m) {
        const auto q_begin = static_cast<int32_t>(q);
        const auto q_end = static_cast<int32_t>(std::min<int64_t>(q + block_m, end));
        const auto range_begin = static_cast<int32_t>(plan.ranges.size());
        // A prompt tile's own causal range already covers the prompt: no ancestor range.
        if (s != prompt) plan.ranges.push_back({layout.prompt_begin(g), layout.prompt_end(g)});
        plan.ranges.push_back({begin, q_end});
        plan.tiles.push_back({q_begin, q_end, range_begin, static_cast<int32_t>(plan.ranges.size())});
      }
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
