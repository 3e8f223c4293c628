// The deterministic mode of the Hopper backward computes dQ with the portable family's
// query-major dQ kernel (fixed reduction order, no atomics); this names the portable tile shape
// whose dQ tiles it runs at each head_dim, for the host plan and the launch alike.
#pragma once

#include <cstdint>

#include "cuda/sm80/backward/tile_shapes.h"

namespace dualkv::detail::sm90 {

// The dQ tiles every head_dim runs: 64 queries, walked in 64-key steps (the host plan's query tiles).
inline constexpr int kDeterministicDqQueryBlock = 64;
inline constexpr int kDeterministicDqKeyBlock = 64;

// The first compiled portable shape of head_dim with those dQ tiles, or nullptr.
constexpr const sm80::BackwardTileShape* deterministic_dq_shape(int64_t head_dim) {
  for (const sm80::BackwardTileShape& shape : sm80::kBackwardTileShapes) {
    if (shape.head_dim == head_dim && shape.dq_query_block == kDeterministicDqQueryBlock &&
        shape.dq_key_block == kDeterministicDqKeyBlock) {
      return &shape;
    }
  }
  return nullptr;
}

}  // namespace dualkv::detail::sm90
