// Granularity of the CPU path's parallel work.
#pragma once

#include <cstdint>

#include "cpu/tile_math.h"

namespace dualkv::detail::cpu {

// Tokens per work item (query block or key block). At the benchmark shape (T = 6144) this gives
// about 100 items per head, enough to balance 16 threads, while each item still spends its time
// in the inner loops rather than in setup.
inline constexpr int32_t kTokenBlock = 64;

// Tokens of the streamed operand (keys for the forward pass and dQ, queries for dK/dV) that are
// applied to every row tile of a block before the next chunk is touched. The chunk's staged rows
// and column tiles (a few times 64 x head_dim values) stay in L1/L2 across the block's row tiles,
// so the cost of a pair no longer depends on how long the streamed range is (a prompt key is
// streamed against thousands of queries, far beyond the caches).
inline constexpr int32_t kStreamChunk = 64;
static_assert(kStreamChunk % kColumnTile == 0, "chunks must hold whole column tiles");

// Tokens converted per staging work item; whole column tiles, so concurrent items never write
// the same panel of a StagedHead.
inline constexpr int64_t kStagingTokens = 256;
static_assert(kStagingTokens % kColumnTile == 0, "staging items must own whole column tiles");

inline int64_t staging_items(int64_t tokens) { return (tokens + kStagingTokens - 1) / kStagingTokens; }

}  // namespace dualkv::detail::cpu
