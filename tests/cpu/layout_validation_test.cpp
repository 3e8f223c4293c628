// Every rule of Layout::from_lengths, Layout::from_offsets, Layout::from_tree and
// Layout::from_tree_offsets, one test each.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/expect_error.h"
#include "dualkv/errors.h"
#include "dualkv/layout.h"

namespace dualkv_test {
namespace {

using Lengths = std::vector<int64_t>;
using ResponseLengths = std::vector<std::vector<int64_t>>;
using Offsets = std::vector<int32_t>;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

BadCall lengths_case(std::string name, Lengths prompts, ResponseLengths responses, std::string argument,
                     std::string phrase) {
  return {std::move(name), [prompts, responses] { dualkv::Layout::from_lengths(prompts, responses); },
          std::move(argument), std::move(phrase)};
}

BadCall offsets_case(std::string name, Offsets cu_seqlens, Offsets cu_groups, std::string argument,
                     std::string phrase) {
  return {std::move(name), [cu_seqlens, cu_groups] { dualkv::Layout::from_offsets(cu_seqlens, cu_groups); },
          std::move(argument), std::move(phrase)};
}

BadCall tree_case(std::string name, Lengths parents, Lengths lengths, std::string argument, std::string phrase) {
  return {std::move(name), [parents, lengths] { dualkv::Layout::from_tree(parents, lengths); }, std::move(argument),
          std::move(phrase)};
}

BadCall tree_offsets_case(std::string name, Offsets cu_seqlens, Offsets parents, std::string argument,
                          std::string phrase) {
  return {std::move(name), [cu_seqlens, parents] { dualkv::Layout::from_tree_offsets(cu_seqlens, parents); },
          std::move(argument), std::move(phrase)};
}

std::vector<BadCall> bad_layouts() {
  return {
      lengths_case("NoGroups", {}, {}, "prompt_lengths", "must not be empty"),
      lengths_case("EmptyPrompt", {3, 0}, {{1}, {1}}, "prompt_lengths[1]", ">= 1"),
      lengths_case("NegativePrompt", {-2}, {{1}}, "prompt_lengths[0]", ">= 1"),
      lengths_case("ResponseListPerGroup", {3, 2}, {{1}}, "response_lengths", "one entry per group"),
      lengths_case("GroupWithoutResponses", {3, 2}, {{1}, {}}, "response_lengths[1]", "at least one response"),
      lengths_case("EmptyResponse", {3, 2}, {{1}, {4, 0}}, "response_lengths[1][1]", ">= 1"),
      // The length that carries the total past int32 is named, with the total it reaches.
      lengths_case("ResponsesOverflowInt32", {kInt32Max - 1}, {{1, 1}}, "response_lengths[0][1]",
                   "total to 2147483648, past the int32 range"),
      lengths_case("PromptsOverflowInt32", {kInt32Max / 2 + 1, kInt32Max / 2 + 1}, {{1}, {1}}, "prompt_lengths[1]",
                   "int32"),
      lengths_case("HugeLengthDoesNotWrap", {std::numeric_limits<int64_t>::max()}, {{1}}, "prompt_lengths[0]",
                   "total to 9223372036854775807, past the int32 range"),
      lengths_case("HugeLengthsDoNotWrapTheirSum", {kInt32Max}, {{std::numeric_limits<int64_t>::max()}},
                   "response_lengths[0][0]", "int32"),
      offsets_case("SeqlensTooShort", {0}, {0, 1}, "cu_seqlens", "at least 2"),
      offsets_case("SeqlensNotFromZero", {1, 3, 5}, {0, 2}, "cu_seqlens[0]", "must be 0"),
      offsets_case("SeqlensDecreasing", {0, 3, 2, 5}, {0, 3}, "cu_seqlens[2]", "increasing"),
      offsets_case("EmptySegment", {0, 3, 3, 5}, {0, 3}, "cu_seqlens[2]", "increasing"),
      offsets_case("GroupsTooShort", {0, 3, 5}, {0}, "cu_groups", "at least 2"),
      offsets_case("GroupsNotFromZero", {0, 3, 5}, {1, 2}, "cu_groups[0]", "must be 0"),
      offsets_case("GroupsMissSegments", {0, 3, 5, 6}, {0, 2}, "cu_groups[1]", "number of segments"),
      offsets_case("GroupWithoutResponse", {0, 3, 5, 6}, {0, 2, 3}, "cu_groups[2]", "at least one response"),
      offsets_case("GroupsDecreasing", {0, 3, 5, 6, 8}, {0, 4, 2, 4}, "cu_groups[2]", "at least one response"),
      tree_case("NoSegments", {}, {}, "lengths", "must not be empty"),
      tree_case("ParentPerSegment", {-1, 0}, {3, 2, 1}, "parents", "one entry per segment"),
      tree_case("ParentAfterItsChild", {-1, 2, 0}, {3, 2, 1}, "parents[1]", "must be < 1"),
      tree_case("OwnParent", {-1, 1}, {3, 2}, "parents[1]", "1 -> 1 form a cycle"),
      tree_case("Cycle", {-1, 3, 1, 2}, {3, 2, 1, 1}, "parents[1]", "1 -> 3 -> 2 -> 1 form a cycle"),
      tree_case("CycleWithoutRoot", {1, 0}, {3, 2}, "parents[0]", "0 -> 1 -> 0 form a cycle"),
      tree_case("ParentPastTheSegments", {-1, 7}, {3, 2}, "parents[1]", "must be -1 (a root) or the index"),
      tree_case("ParentBelowMinusOne", {-1, -2}, {3, 2}, "parents[1]", "must be -1 (a root) or the index"),
      tree_case("FirstSegmentNotARoot", {0}, {3}, "parents[0]", "0 -> 0 form a cycle"),
      tree_case("EmptyTreeSegment", {-1, 0, 0}, {3, 0, 1}, "lengths[1]", ">= 1"),
      tree_case("NegativeLength", {-1, 0}, {3, -4}, "lengths[1]", ">= 1"),
      // Every path is at most the total, so the total's overflow covers every path's.
      tree_case("PathOverflowsInt32", {-1, 0, 1}, {kInt32Max - 2, 1, 2}, "lengths[2]",
                "total to 2147483648, past the int32 range"),
      tree_case("HugeTreeLengthDoesNotWrap", {-1}, {std::numeric_limits<int64_t>::max()}, "lengths[0]", "int32"),
      tree_case("HugeParentDoesNotWrap", {-1, int64_t{1} << 32}, {3, 2}, "parents[1]", "got 4294967296"),
      tree_offsets_case("TreeSeqlensNotFromZero", {1, 3, 5}, {-1, 0}, "cu_seqlens[0]", "must be 0"),
      tree_offsets_case("EmptySegmentOffsets", {0, 3, 3}, {-1, 0}, "cu_seqlens[2]", "increasing"),
      tree_offsets_case("ParentsPerSegment", {0, 3, 5}, {-1}, "parents", "one entry per segment (2"),
      tree_offsets_case("ParentsCycle", {0, 3, 5}, {-1, 1}, "parents[1]", "cycle"),
      tree_offsets_case("ParentsOutOfOrder", {0, 3, 5, 6}, {-1, 2, -1}, "parents[1]", "must be < 1"),
  };
}

class LayoutRule : public ::testing::TestWithParam<BadCall> {};

TEST_P(LayoutRule, IsRejectedNamingArgumentAndRule) { EXPECT_TRUE(rejected_as_expected(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Layout, LayoutRule, ::testing::ValuesIn(bad_layouts()), bad_call_name);

TEST(LayoutRules, EveryBadLayoutThrowsDualkvError) {
  for (const BadCall& bad : bad_layouts()) {
    SCOPED_TRACE(bad.name);
    EXPECT_THROW(bad.call(), dualkv::Error);
  }
}

TEST(LayoutRules, LargestValidTotalIsAccepted) {
  const dualkv::Layout layout = dualkv::Layout::from_lengths({kInt32Max - 1}, {{1}});
  EXPECT_EQ(layout.total_tokens(), kInt32Max);
  const dualkv::Layout path = dualkv::Layout::from_tree({-1, 0, 1}, {kInt32Max - 3, 1, 2});
  EXPECT_EQ(path.position_begin(2), kInt32Max - 2);
}

}  // namespace
}  // namespace dualkv_test
