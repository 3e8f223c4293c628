// The deterministic mode of the Hopper backward computes dQ with the portable family's
// query-major dQ kernel (fixed reduction order, no atomics); this names the portable tile shape
// whose dQ kernel it runs at each head_dim, for the host plan and the launch alike.
#pragma once

#include <cstdint>

#include "cuda/sm80/backward/tile_shapes.h"

namespace dualkv::detail::sm90 {

// The first (fastest) portable shape of head_dim, or nullptr: its dQ kernel fits a Hopper CTA's
// shared memory at every compiled head_dim ((64, 128 keys, 64 queries), (128, 128, 64),
// (256, 64, 64)). The launch names its kernel traits by the shape's (head_dim, key_block,
// query_block): sm80::BackwardTraits<Element, head_dim, shape.key_block, shape.query_block>.
constexpr const sm80::BackwardTileShape* deterministic_dq_shape(int64_t head_dim) {
  for (const sm80::BackwardTileShape& shape : sm80::kBackwardTileShapes) {
    if (shape.head_dim == head_dim) return &shape;
  }
  return nullptr;
}

// The dQ kernel's query tiles are the host plan's, one size at every head_dim (its key steps,
// dq_key_block, are the kernel's own: 64 keys at head_dim 64 and 128, 32 at 256).
inline constexpr sm80::BackwardTileShape kDeterministicDqShape = *deterministic_dq_shape(128);
static_assert(deterministic_dq_shape(64)->dq_query_block == kDeterministicDqShape.dq_query_block &&
              deterministic_dq_shape(256)->dq_query_block == kDeterministicDqShape.dq_query_block);

}  // namespace dualkv::detail::sm90
