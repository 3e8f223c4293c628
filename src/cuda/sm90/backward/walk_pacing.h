// Walk pacing of the Hopper backward (tile_shape.h's walk_lead_steps), the rule as plain C++ so the
// CPU tests check it: a key tile's producer loads a step at most lead rows ahead of the key tile
// before it in the plan (same KV head, same segment) while both walk the same query head.
//
// Why: the key tiles of one KV head resident at once read the same Q, dO, LSE and D tiles and
// reduce into the same dQ slots, one after the other as their walks pass them. Those lines are
// reused from L2 only while the walks are close together, and nothing in a fixed walk order keeps
// them so: in the first wave a tile's pass over each head is a step shorter than its
// predecessor's, so it runs a step further ahead at every head; later waves start staggered. At
// head_dim 256 the resident walks then touch more lines than L2 holds and the backward runs at
// DRAM speed (docs/performance.md, "Paced walks").
//
// Only the successor waits, and only for a predecessor that has started, has not finished and
// walks the same head: a tile that starts behind its predecessor (later waves) is never held, and
// no tile is held behind one that started after it. Waits form chains to ever lower CTAs, each a
// started one; the chain's lowest never waits, and every tile it holds back moves on once it
// passes or leaves the head, so every wait ends (whatever order the CTAs start in).
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/common/query_walk.h"
#include "host/backward_plan.h"

namespace dualkv::detail::sm90 {

// A producer's published position: kWalkNotStarted before its first step, then (head + 1, first
// query row) of the step it is about to load, kWalkDone once it has loaded its last.
inline constexpr uint64_t kWalkNotStarted = 0;
inline constexpr uint64_t kWalkDone = ~uint64_t{0};

DUALKV_HOST_DEVICE uint64_t walk_position(const QueryStep& step) {
  return (static_cast<uint64_t>(step.head + 1) << 32) | static_cast<uint32_t>(step.begin);
}

// Whether a producer about to load the step at `own` waits while its predecessor is at `predecessor`.
DUALKV_HOST_DEVICE bool walk_waits(uint64_t own, uint64_t predecessor, int lead_rows) {
  if (predecessor == kWalkNotStarted || predecessor == kWalkDone || (own >> 32) != (predecessor >> 32)) return false;
  return static_cast<int64_t>(own & 0xffffffffu) - static_cast<int64_t>(predecessor & 0xffffffffu) > lead_rows;
}

// The CTA that CTA `block` is paced behind, or -1: the plan's previous key tile of the same KV head
// (CTA block - kv_heads), when it lies in the same segment, so that both walk the same query tiles.
DUALKV_HOST_DEVICE int64_t paced_behind(const TileWork* key_tiles, int64_t block, int kv_heads) {
  const int64_t tile = block / kv_heads;
  return tile > 0 && key_tiles[tile - 1].segment == key_tiles[tile].segment ? block - kv_heads : -1;
}

}  // namespace dualkv::detail::sm90
