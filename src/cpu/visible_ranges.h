// Which keys a query sees and which queries see a key, derived from the mask definition alone
// (include/dualkv/layout.h) so that the CPU path can serve as the test oracle of every other backend.
//
// Query q of group g sees key k iff k <= q and k lies in g's prompt or in q's own segment.
// Work is cut into blocks of consecutive tokens that never straddle a segment, so every token of
// a block obeys the same rule:
//   - a query block reads the key ranges of keys_seen_by(); inside them the only remaining
//     condition is causality (key <= query), which holds trivially for a response's prompt keys;
//   - a key block is read by the query range of queries_seeing(); inside it the only remaining
//     condition is again causality (query >= key). Prompt keys are seen by the rest of the
//     prompt and by every response of the group, which are contiguous in packed order up to the
//     group's end; response keys only by later queries of their own response.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/layout.h"

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
  int32_t group = 0;
};

// The (at most two) key ranges read by a query block, in ascending token order.
struct KeyRanges {
  TokenRange prompt;  // for a prompt block: its causal prefix; for a response block: the whole prompt
  TokenRange own;     // for a response block: its segment up to the block's end; empty for a prompt
};

// Every token in exactly one block, in packed order.
std::vector<TokenBlock> split_into_blocks(const Layout& layout, int32_t block_size);

KeyRanges keys_seen_by(const Layout& layout, const TokenBlock& queries);
TokenRange queries_seeing(const Layout& layout, const TokenBlock& keys);

// Visible (query, key) pairs with the query, resp. the key, in the block: the block's cost.
int64_t pairs_of_query_block(const Layout& layout, const TokenBlock& queries);
int64_t pairs_of_key_block(const Layout& layout, const TokenBlock& keys);

// Indices of `costs` ordered heaviest first (stable), so that workers drawing from a shared
// counter start the long blocks early and finish on short ones.
std::vector<int32_t> heaviest_first(const std::vector<int64_t>& costs);

}  // namespace dualkv::detail::cpu
