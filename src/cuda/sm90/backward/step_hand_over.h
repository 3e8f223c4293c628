// What the Hopper backward's producer hands the consumers beside each step's Q stage, and how
// (host-device, so the CPU tests replay it against the walk): the step after it in the walk, and
// for the head_dim 256 kernel, whose consumers add dQ themselves, that step's dQ accumulator slot.
// The consumers read it during the step, so the next step is in registers by the time its stage
// lands and their loop reads no global memory (the walk's run table, the slot's segment offsets).
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/common/query_walk.h"
#include "cuda/sm90/backward/dq_accumulator.h"
#include "host/backward_plan.h"

namespace dualkv::detail::sm90 {

struct HandedStep {
  QueryStep next;  // unless last
  int last;        // the step is the walk's last: the consumers end their loop after it
};
struct HandedStepAndDqSlot {
  HandedStep step;
  int64_t next_dq_slot;  // unless step.last
};

// Where the producer finds the next step's dQ slot: the key tile, the plan's run table, its own
// segment cursor (fresh at the walk's start: the consumers compute the first step's slot) and the
// first tail slot.
struct DqSlotSource {
  const TileWork& key_tile;
  const QueryRun* runs;
  SegmentCursor& segments;
  int64_t tail_slots_begin;
  int block_m;
};

// `step` becomes the walk's next, handed over with whether the walk ends there; returns whether it
// did. The producer calls it for the step it is about to load, before waiting for that step's
// stage. (A walk is never empty: a key tile's own rows see it, so the consumers compute its first
// step themselves.)
DUALKV_HOST_DEVICE bool hand_over_next(const QueryWalk& walk, QueryStep& step, HandedStep& handed) {
  walk.advance(step);
  handed.next = step;
  handed.last = walk.done(step);
  return handed.last;
}
DUALKV_HOST_DEVICE bool hand_over_next(const QueryWalk& walk, QueryStep& step, HandedStepAndDqSlot& handed,
                                       const DqSlotSource& slots) {
  const bool last = hand_over_next(walk, step, handed.step);
  if (!last) {
    handed.next_dq_slot =
        dq_step_slot(step, slots.key_tile, slots.runs, slots.segments, slots.tail_slots_begin, slots.block_m);
  }
  return last;
}

}  // namespace dualkv::detail::sm90
