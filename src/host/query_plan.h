// Architecture-neutral forward work plan: the query tiles of a layout and, for each, the list of
// key ranges its rows read. Plain C++ so that a CPU test can check it against the mask definition;
// the CUDA entry points upload it and every kernel family walks it (cuda/common/key_block_walk.h).
//
// A query tile is at most block_m consecutive query rows of ONE segment (tiles never straddle
// segments, so every row of a tile has the same visibility rule). Its key ranges, in ascending key
// order, are the segments it sees: every range but the last is a run of consecutive ancestor
// segments read in full (two-level layouts: the group's prompt, for a response tile; trees: the
// path's ancestors, merged where they are contiguous in packed order), and the last is the tile's
// own segment read causally, keys [segment begin, q_end) with key <= query. A tree is a longer
// list of ancestors: the same kernels. Built in time linear in the plan (host/tree_ranges.h).
//
// Tiles are ordered heaviest first (most visible keys) so that a grid walking the list in order
// starts the long tiles early and finishes with short ones, which balances the last wave.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/layout.h"

namespace dualkv::detail {

// Keys [begin, end) of one segment, int32 token indices into the packed tensors.
struct KeyRange {
  int32_t begin;
  int32_t end;
};

// Query rows [q_begin, q_end) and their key ranges, QueryPlan::ranges[range_begin, range_end).
struct QueryTile {
  int32_t q_begin;
  int32_t q_end;
  int32_t range_begin;
  int32_t range_end;
};

struct QueryPlan {
  std::vector<QueryTile> tiles;
  std::vector<KeyRange> ranges;
};

// Keys the last row of `tile` sees: the ordering weight.
int64_t visible_keys_of_last_row(const QueryPlan& plan, const QueryTile& tile);

// Every query row in exactly one tile, heaviest first (stable: equal weights stay in packed order).
QueryPlan build_query_plan(const Layout& layout, int block_m);

}  // namespace dualkv::detail
