// The deterministic mode of the Hopper backward computes dQ with the portable family's
// query-major dQ kernel (fixed reduction order, no atomics); this names the portable tile shape
// whose dQ tiles it runs, for the host plan and the launch alike.
#pragma once

#include "cuda/sm80/backward/tile_shapes.h"

namespace dualkv::detail::sm90 {

// The portable shape for (head_dim, 128 keys, 64 queries): its dq_query_block and dq_key_block
// do not depend on head_dim (the static_assert keeps it so).
inline constexpr sm80::BackwardTileShape kDeterministicDqShape = *sm80::find_backward_tile_shape(128, 128, 64);
static_assert(sm80::find_backward_tile_shape(64, 128, 64)->dq_query_block == kDeterministicDqShape.dq_query_block &&
              sm80::find_backward_tile_shape(64, 128, 64)->dq_key_block == kDeterministicDqShape.dq_key_block);

}  // namespace dualkv::detail::sm90
