// The segments a segment's queries read and the segments whose queries read its keys, in a tree
// layout (layout.h): its ancestors and its descendants, as intervals of consecutive segments
// (consecutive segments are consecutive tokens). The CPU path, the forward plan and the backward
// plan all derive their ranges from these, so visibility is decided here once, from the parents.
//
// Built in time linear in its output: a segment's ancestors are its parent's plus the parent, and
// its descendants the union of its children's, each child included; in packed order every
// ancestor precedes its descendants, so one pass each way suffices.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/layout.h"

namespace dualkv::detail {

// Segments [first, end).
struct SegmentInterval {
  int32_t first;
  int32_t end;
};

// Per segment s, intervals [offsets[s], offsets[s + 1]) of `intervals`: ascending, disjoint and
// not adjacent (adjacent ones are merged).
struct SegmentIntervals {
  std::vector<int32_t> offsets;
  std::vector<SegmentInterval> intervals;

  const SegmentInterval* begin(int32_t s) const { return intervals.data() + offsets[s]; }
  const SegmentInterval* end(int32_t s) const { return intervals.data() + offsets[s + 1]; }
  int32_t count(int32_t s) const { return offsets[s + 1] - offsets[s]; }
};

SegmentIntervals ancestor_intervals(const Layout& layout);
SegmentIntervals descendant_intervals(const Layout& layout);

// Tokens of the segments of `interval`.
inline int64_t interval_tokens(const Layout& layout, const SegmentInterval& interval) {
  return int64_t{layout.segment_begin(interval.end)} - layout.segment_begin(interval.first);
}

}  // namespace dualkv::detail
