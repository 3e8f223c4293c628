#include "cpu/visible_ranges.h"

#include <algorithm>
#include <numeric>

namespace dualkv::detail::cpu {
namespace {

bool is_prompt(const Layout& layout, const TokenBlock& block) {
  return block.segment == layout.prompt_segment(block.group);
}

// sum_{t=first}^{last} (t - origin + 1): the causal pairs of tokens [first, last] counted from origin.
int64_t causal_pairs(int64_t origin, int64_t first, int64_t last) {
  const int64_t a = first - origin + 1;
  const int64_t b = last - origin + 1;
  return (a + b) * (b - a + 1) / 2;
}

}  // namespace

std::vector<TokenBlock> split_into_blocks(const Layout& layout, int32_t block_size) {
  std::vector<TokenBlock> blocks;
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    for (int32_t s = layout.prompt_segment(g); s < layout.cu_groups()[g + 1]; ++s) {
      const int32_t end = layout.segment_end(s);
      // Step by at most the remainder so that begin never passes end (no int32 overflow near 2^31).
      for (int32_t begin = layout.segment_begin(s); begin < end; begin += std::min(block_size, end - begin)) {
        blocks.push_back({begin, std::min(begin + block_size, end), s, g});
      }
    }
  }
  return blocks;
}

KeyRanges keys_seen_by(const Layout& layout, const TokenBlock& queries) {
  const int32_t prompt_begin = layout.prompt_begin(queries.group);
  if (is_prompt(layout, queries)) return {{prompt_begin, queries.end}, {}};
  return {{prompt_begin, layout.prompt_end(queries.group)}, {layout.segment_begin(queries.segment), queries.end}};
}

TokenRange queries_seeing(const Layout& layout, const TokenBlock& keys) {
  const int32_t end = is_prompt(layout, keys) ? layout.group_end(keys.group) : layout.segment_end(keys.segment);
  return {keys.begin, end};
}

int64_t pairs_of_query_block(const Layout& layout, const TokenBlock& queries) {
  const KeyRanges ranges = keys_seen_by(layout, queries);
  const int64_t rows = queries.end - queries.begin;
  if (is_prompt(layout, queries)) return causal_pairs(ranges.prompt.begin, queries.begin, queries.end - 1);
  return rows * ranges.prompt.size() + causal_pairs(ranges.own.begin, queries.begin, queries.end - 1);
}

int64_t pairs_of_key_block(const Layout& layout, const TokenBlock& keys) {
  // Key k is seen by the end - k queries [k, end); the sum over k is an arithmetic series.
  const int64_t end = queries_seeing(layout, keys).end;
  const int64_t count = keys.end - keys.begin;
  return count * end - count * (static_cast<int64_t>(keys.begin) + keys.end - 1) / 2;
}

std::vector<int32_t> heaviest_first(const std::vector<int64_t>& costs) {
  std::vector<int32_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return costs[a] > costs[b]; });
  return order;
}

}  // namespace dualkv::detail::cpu
