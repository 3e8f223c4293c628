// Granularity of the CPU path's parallel work.
#pragma once

#include <cstdint>

namespace dualkv::detail::cpu {

// Tokens per work item (query block or key block). At the benchmark shape (T = 6144) this gives
// about 100 items per head, enough to balance 16 threads, while each item still spends its time
// in the inner loops rather than in setup.
inline constexpr int32_t kTokenBlock = 64;

// Tokens converted per staging work item.
inline constexpr int64_t kStagingTokens = 256;

inline int64_t staging_items(int64_t tokens) { return (tokens + kStagingTokens - 1) / kStagingTokens; }

}  // namespace dualkv::detail::cpu
