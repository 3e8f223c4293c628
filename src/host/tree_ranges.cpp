#include "host/tree_ranges.h"

#include <algorithm>

namespace dualkv::detail {
namespace {

// Appends `interval` to `out`, merging it into the last interval when they touch (`out` ascending,
// `interval` not before its last).
void append_merged(std::vector<SegmentInterval>& out, size_t first_of_segment, SegmentInterval interval) {
  if (out.size() > first_of_segment && out.back().end == interval.first) {
    out.back().end = interval.end;
  } else {
    out.push_back(interval);
  }
}

}  // namespace

SegmentIntervals ancestor_intervals(const Layout& layout) {
  const int32_t segments = layout.num_segments();
  SegmentIntervals result;
  result.offsets.reserve(static_cast<size_t>(segments) + 1);
  result.offsets.push_back(0);
  for (int32_t s = 0; s < segments; ++s) {
    const int32_t parent = layout.parent(s);
    const size_t first = result.intervals.size();
    if (parent >= 0) {
      // The parent's own list, then the parent: every ancestor of the parent precedes it.
      for (int32_t i = result.offsets[parent]; i < result.offsets[parent + 1]; ++i) {
        const SegmentInterval copy = result.intervals[static_cast<size_t>(i)];  // push_back may reallocate
        result.intervals.push_back(copy);
      }
      append_merged(result.intervals, first, {parent, parent + 1});
    }
    result.offsets.push_back(static_cast<int32_t>(result.intervals.size()));
  }
  return result;
}

SegmentIntervals descendant_intervals(const Layout& layout) {
  const auto segments = static_cast<size_t>(layout.num_segments());
  // Children per segment, ascending (CSR).
  std::vector<int32_t> child_offsets(segments + 1, 0);
  for (size_t s = 0; s < segments; ++s) {
    const int32_t parent = layout.parent(static_cast<int32_t>(s));
    if (parent >= 0) ++child_offsets[static_cast<size_t>(parent) + 1];
  }
  for (size_t s = 0; s < segments; ++s) child_offsets[s + 1] += child_offsets[s];
  std::vector<int32_t> children(static_cast<size_t>(child_offsets[segments]));
  std::vector<int32_t> fill(child_offsets.begin(), child_offsets.end() - 1);
  for (size_t s = 0; s < segments; ++s) {
    const int32_t parent = layout.parent(static_cast<int32_t>(s));
    if (parent >= 0) children[static_cast<size_t>(fill[static_cast<size_t>(parent)]++)] = static_cast<int32_t>(s);
  }
  // Children come after their parent, so one pass from the last segment back sees every child's
  // list before its parent's. Lists are kept apart until then, then laid out in segment order.
  std::vector<std::vector<SegmentInterval>> lists(segments);
  std::vector<SegmentInterval> gathered;
  for (size_t s = segments; s-- > 0;) {
    gathered.clear();
    for (int32_t i = child_offsets[s]; i < child_offsets[s + 1]; ++i) {
      const auto child = static_cast<size_t>(children[static_cast<size_t>(i)]);
      gathered.push_back({static_cast<int32_t>(child), static_cast<int32_t>(child) + 1});
      gathered.insert(gathered.end(), lists[child].begin(), lists[child].end());
    }
    // Subtrees are disjoint: sorting by first segment and merging touching intervals is exact.
    std::sort(gathered.begin(), gathered.end(),
              [](const SegmentInterval& a, const SegmentInterval& b) { return a.first < b.first; });
    for (const SegmentInterval& interval : gathered) append_merged(lists[s], 0, interval);
  }
  SegmentIntervals result;
  result.offsets.reserve(segments + 1);
  result.offsets.push_back(0);
  for (std::vector<SegmentInterval>& list : lists) {
    result.intervals.insert(result.intervals.end(), list.begin(), list.end());
    result.offsets.push_back(static_cast<int32_t>(result.intervals.size()));
    std::vector<SegmentInterval>().swap(list);
  }
  return result;
}

}  // namespace dualkv::detail
