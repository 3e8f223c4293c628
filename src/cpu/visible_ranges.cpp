#include "cpu/visible_ranges.h"

#include <algorithm>
#include <numeric>

namespace dualkv::detail::cpu {
namespace {

// sum_{t=first}^{last} (t - origin + 1): the causal pairs of tokens [first, last] counted from origin.
int64_t causal_pairs(int64_t origin, int64_t first, int64_t last) {
  const int64_t a = first - origin + 1;
  const int64_t b = last - origin + 1;
  return (a + b) * (b - a + 1) / 2;
}

TokenRange tokens_of_interval(const Layout& layout, const SegmentInterval& interval) {
  return {layout.segment_begin(interval.first), layout.segment_begin(interval.end)};
}

}  // namespace

std::vector<TokenBlock> split_into_blocks(const Layout& layout, int32_t block_size) {
  std::vector<TokenBlock> blocks;
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    const int32_t end = layout.segment_end(s);
    // Step by at most the remainder so that begin never passes end (no int32 overflow near 2^31).
    for (int32_t begin = layout.segment_begin(s); begin < end; begin += std::min(block_size, end - begin)) {
      blocks.push_back({begin, std::min(begin + block_size, end), s});
    }
  }
  return blocks;
}

Visibility::Visibility(const Layout& layout)
    : layout_(layout), ancestors_(ancestor_intervals(layout)), descendants_(descendant_intervals(layout)) {}

std::vector<TokenRange> Visibility::keys_seen_by(const TokenBlock& queries) const {
  std::vector<TokenRange> ranges;
  ranges.reserve(static_cast<size_t>(ancestors_.count(queries.segment)) + 1);
  for (const SegmentInterval* i = ancestors_.begin(queries.segment); i != ancestors_.end(queries.segment); ++i) {
    ranges.push_back(tokens_of_interval(layout_, *i));
  }
  ranges.push_back({layout_.segment_begin(queries.segment), queries.end});
  return ranges;
}

std::vector<TokenRange> Visibility::queries_seeing(const TokenBlock& keys) const {
  std::vector<TokenRange> ranges{{keys.begin, layout_.segment_end(keys.segment)}};
  for (const SegmentInterval* i = descendants_.begin(keys.segment); i != descendants_.end(keys.segment); ++i) {
    ranges.push_back(tokens_of_interval(layout_, *i));
  }
  return ranges;
}

int64_t Visibility::tokens_of(const SegmentInterval* begin, const SegmentInterval* end) const {
  int64_t tokens = 0;
  for (const SegmentInterval* i = begin; i != end; ++i) tokens += interval_tokens(layout_, *i);
  return tokens;
}

int64_t Visibility::pairs_of_query_block(const TokenBlock& queries) const {
  const int64_t rows = queries.end - queries.begin;
  const int64_t ancestor_keys = tokens_of(ancestors_.begin(queries.segment), ancestors_.end(queries.segment));
  return rows * ancestor_keys + causal_pairs(layout_.segment_begin(queries.segment), queries.begin, queries.end - 1);
}

int64_t Visibility::pairs_of_key_block(const TokenBlock& keys) const {
  // Key k is seen by the end - k queries [k, end) of its segment (an arithmetic series over the
  // block's keys) and by every descendant query.
  const int64_t end = layout_.segment_end(keys.segment);
  const int64_t count = keys.end - keys.begin;
  const int64_t own = count * end - count * (static_cast<int64_t>(keys.begin) + keys.end - 1) / 2;
  return own + count * tokens_of(descendants_.begin(keys.segment), descendants_.end(keys.segment));
}

std::vector<int32_t> heaviest_first(const std::vector<int64_t>& costs) {
  std::vector<int32_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return costs[a] > costs[b]; });
  return order;
}

}  // namespace dualkv::detail::cpu
