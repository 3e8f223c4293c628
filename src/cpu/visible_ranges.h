// Which keys a query sees and which queries see a key, derived from the mask definition alone
// (include/dualkv/layout.h, tree layouts) so that the CPU path can serve as the test oracle of every
// other backend.
//
// Query q of segment s sees key k iff k <= q and k lies in s or in an ancestor of s.
// Work is cut into blocks of consecutive tokens that never straddle a segment, so every token of
// a block obeys the same rule:
//   - a query block reads the key ranges of keys_seen_by(): its ancestors (which precede it) and
//     its own segment up to the block's end; inside them the only remaining condition is
//     causality (key <= query), which holds trivially for ancestor keys;
//   - a key block is read by the query ranges of queries_seeing(): its own segment from the
//     block on and every descendant (which follow it); inside them the only remaining condition
//     is again causality (query >= key), trivially true for descendant queries.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/layout.h"
#include "host/tree_ranges.h"

namespace dualkv::detail::cpu {

struct TokenRange {
  int32_t begin = 0;
  int32_t end = 0;
  int32_t size() const { return end - begin; }
};

// At most block_size consecutive tokens of one segment.
struct TokenBlock {
  int32_t begin = 0;
  int32_t end = 0;
  int32_t segment = 0;
};

// Every token in exactly one block, in packed order.
std::vector<TokenBlock> split_into_blocks(const Layout& layout, int32_t block_size);

// The visibility of one layout's blocks.
class Visibility {
 public:
  explicit Visibility(const Layout& layout);

  // Ascending: the ancestors (merged where contiguous), then the own segment up to the block's end.
  std::vector<TokenRange> keys_seen_by(const TokenBlock& queries) const;
  // Ascending: the own segment from the block's first key on, then the descendants.
  std::vector<TokenRange> queries_seeing(const TokenBlock& keys) const;

  // Visible (query, key) pairs with the query, resp. the key, in the block: the block's cost.
  int64_t pairs_of_query_block(const TokenBlock& queries) const;
  int64_t pairs_of_key_block(const TokenBlock& keys) const;

 private:
  int64_t tokens_of(const SegmentInterval* begin, const SegmentInterval* end) const;

  const Layout& layout_;
  SegmentIntervals ancestors_;
  SegmentIntervals descendants_;
};

// Indices of `costs` ordered heaviest first (stable), so that workers drawing from a shared
// counter start the long blocks early and finish on short ones.
std::vector<int32_t> heaviest_first(const std::vector<int64_t>& costs);

}  // namespace dualkv::detail::cpu
