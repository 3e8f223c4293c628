// Layout factories and accessors against the lengths they were built from, and the pair counts
// against brute-force counts of the oracles' masks.
#include "dualkv/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cpu/batch_spec.h"
#include "cpu/oracle_dense_mask.h"
#include "cpu/oracle_ncopy.h"
#include "cpu/oracle_tree.h"
#include "cpu/test_support.h"
#include "cpu/tree_spec.h"

namespace dualkv_test {
namespace {

// Ragged groups with P = 1 and R = 1 somewhere among them.
BatchSpec mixed_batch() { return {{4, {3, 1, 5}}, {1, {1}}, {6, {2, 7}}, {2, {1, 1, 1, 1}}}; }

BatchSpec random_batch(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> groups(1, 4), responses(1, 5), length(1, 12);
  BatchSpec batch(groups(rng));
  for (GroupLengths& group : batch) {
    group.prompt = length(rng);
    group.responses.resize(responses(rng));
    for (int64_t& r : group.responses) r = length(rng);
  }
  return batch;
}

void expect_layout_matches(const dualkv::Layout& layout, const BatchSpec& batch) {
  const std::vector<GroupTokens> ranges = packed_token_ranges(batch);
  ASSERT_EQ(layout.num_groups(), static_cast<int32_t>(batch.size()));
  EXPECT_EQ(layout.total_tokens(), packed_token_count(batch));
  int32_t segments = 0;
  int64_t longest = 0;
  for (size_t g = 0; g < batch.size(); ++g) {
    const auto group = static_cast<int32_t>(g);
    EXPECT_EQ(layout.prompt_segment(group), segments);
    EXPECT_EQ(layout.prompt_begin(group), ranges[g].prompt_begin);
    EXPECT_EQ(layout.prompt_length(group), batch[g].prompt);
    EXPECT_EQ(layout.prompt_end(group), ranges[g].prompt_begin + batch[g].prompt);
    EXPECT_EQ(layout.num_responses(group), static_cast<int32_t>(batch[g].responses.size()));
    longest = std::max(longest, batch[g].prompt);
    for (size_t i = 0; i < batch[g].responses.size(); ++i) {
      const int32_t segment = segments + 1 + static_cast<int32_t>(i);
      EXPECT_EQ(layout.segment_begin(segment), ranges[g].response_begins[i]);
      EXPECT_EQ(layout.segment_end(segment), ranges[g].response_begins[i] + batch[g].responses[i]);
      longest = std::max(longest, batch[g].responses[i]);
    }
    segments += 1 + static_cast<int32_t>(batch[g].responses.size());
    EXPECT_EQ(layout.group_end(group), g + 1 < batch.size() ? ranges[g + 1].prompt_begin : packed_token_count(batch));
    EXPECT_EQ(layout.cu_groups()[g + 1], segments);
  }
  EXPECT_EQ(layout.num_segments(), segments);
  EXPECT_EQ(layout.cu_seqlens().front(), 0);
  EXPECT_EQ(layout.max_segment_length(), longest);
}

int64_t ncopy_tokens_by_copying(const BatchSpec& batch) {
  int64_t tokens = 0;
  for (const oracle::CopiedSequence& copy : oracle::ncopy_sequences(batch)) {
    tokens += static_cast<int64_t>(copy.packed_rows.size());
  }
  return tokens;
}

int64_t ncopy_pairs_by_counting(const BatchSpec& batch) {
  int64_t pairs = 0;
  for (const oracle::CopiedSequence& copy : oracle::ncopy_sequences(batch)) {
    pairs += oracle::KeyMask::causal(static_cast<int64_t>(copy.packed_rows.size())).count_visible();
  }
  return pairs;
}

TEST(Layout, FromLengthsAccessorsMatchTheLengths) {
  const BatchSpec batch = mixed_batch();
  expect_layout_matches(make_layout(batch), batch);
}

TEST(Layout, FromOffsetsRoundTripsFromLengths) {
  const BatchSpec batch = mixed_batch();
  const dualkv::Layout from_lengths = make_layout(batch);
  const dualkv::Layout from_offsets = dualkv::Layout::from_offsets(from_lengths.cu_seqlens(), from_lengths.cu_groups());
  EXPECT_EQ(from_offsets.cu_seqlens(), from_lengths.cu_seqlens());
  EXPECT_EQ(from_offsets.cu_groups(), from_lengths.cu_groups());
  expect_layout_matches(from_offsets, batch);
}

TEST(Layout, SingleTokenPromptAndResponse) {
  const BatchSpec batch = {{1, {1}}};
  const dualkv::Layout layout = make_layout(batch);
  expect_layout_matches(layout, batch);
  EXPECT_EQ(layout.visible_pairs(), oracle::packed_mask(batch).count_visible());
  EXPECT_EQ(layout.ncopy_pairs(), ncopy_pairs_by_counting(batch));
}

TEST(Layout, PairCountsMatchBruteForceOnRandomBatches) {
  std::mt19937_64 rng = rng_for_current_test();
  for (int trial = 0; trial < 20; ++trial) {
    const BatchSpec batch = random_batch(rng);
    const dualkv::Layout layout = make_layout(batch);
    SCOPED_TRACE("trial " + std::to_string(trial));
    expect_layout_matches(layout, batch);
    EXPECT_EQ(layout.visible_pairs(), oracle::packed_mask(batch).count_visible());
    EXPECT_EQ(layout.ncopy_pairs(), ncopy_pairs_by_counting(batch));
    EXPECT_EQ(layout.ncopy_tokens(), ncopy_tokens_by_copying(batch));
  }
}

TEST(Layout, PairCountsDoNotOverflowAtTrainingScale) {
  // N = 28, P = 32K, R = 2K (a benchmark shape): the N-copy counts exceed the int32 range.
  const int64_t prompt = 32768, response = 2048, copies = 28;
  const dualkv::Layout layout = dualkv::Layout::from_lengths({prompt}, {std::vector<int64_t>(copies, response)});
  const int64_t sequence = prompt + response;
  EXPECT_EQ(layout.ncopy_tokens(), copies * sequence);
  EXPECT_EQ(layout.ncopy_pairs(), copies * (sequence * (sequence + 1) / 2));
  EXPECT_EQ(layout.visible_pairs(),
            prompt * (prompt + 1) / 2 + copies * (response * prompt + response * (response + 1) / 2));
}

// A tree's accessors against the parents and lengths: positions continue along the path, the
// depth is the longest path's segments, the pair counts are the tree mask's and the paths'.
TEST(Layout, FromTreeAccessorsMatchTheTree) {
  std::mt19937_64 rng = rng_for_current_test();
  for (int trial = 0; trial < 20; ++trial) {
    TreeShape shape;
    shape.max_depth = 1 + trial % 8;
    shape.roots = 1 + trial % 3;
    shape.depth_first = trial % 2 == 0;
    const TreeSpec tree = random_tree(shape, rng);
    const dualkv::Layout layout = dualkv::Layout::from_tree(tree.parents, tree.lengths);
    SCOPED_TRACE("trial " + std::to_string(trial));
    ASSERT_EQ(layout.num_segments(), static_cast<int32_t>(tree.lengths.size()));
    EXPECT_EQ(layout.total_tokens(), tree_token_count(tree));
    EXPECT_EQ(layout.depth(), shape.max_depth);
    int64_t begin = 0;
    for (size_t s = 0; s < tree.lengths.size(); ++s) {
      EXPECT_EQ(layout.parent(static_cast<int32_t>(s)), tree.parents[s]);
      EXPECT_EQ(layout.segment_begin(static_cast<int32_t>(s)), begin);
      begin += tree.lengths[s];
      int64_t ancestors = 0;
      for (int64_t a = tree.parents[s]; a >= 0; a = tree.parents[static_cast<size_t>(a)]) {
        ancestors += tree.lengths[static_cast<size_t>(a)];
      }
      EXPECT_EQ(layout.position_begin(static_cast<int32_t>(s)), ancestors) << "segment " << s;
    }
    EXPECT_EQ(layout.visible_pairs(), oracle::tree_mask(tree).count_visible());
    int64_t path_tokens = 0, path_pairs = 0;
    for (const oracle::CopiedSequence& path : oracle::path_sequences(tree)) {
      path_tokens += static_cast<int64_t>(path.packed_rows.size());
      path_pairs += oracle::KeyMask::causal(static_cast<int64_t>(path.packed_rows.size())).count_visible();
    }
    EXPECT_EQ(layout.ncopy_tokens(), path_tokens);
    EXPECT_EQ(layout.ncopy_pairs(), path_pairs);
  }
}

// Two-level trees have groups, whatever factory made them; other trees have none.
TEST(Layout, TwoLevelTreesHaveGroups) {
  const BatchSpec batch = mixed_batch();
  const TreeSpec tree = tree_of(batch);
  const dualkv::Layout from_tree = dualkv::Layout::from_tree(tree.parents, tree.lengths);
  ASSERT_TRUE(from_tree.is_two_level());
  expect_layout_matches(from_tree, batch);
  EXPECT_EQ(from_tree.parents(), make_layout(batch).parents());
  const auto groups_of = [](std::vector<int64_t> parents, std::vector<int64_t> lengths) {
    return dualkv::Layout::from_tree(parents, lengths);
  };
  EXPECT_FALSE(groups_of({-1}, {3}).is_two_level());               // a root without children
  EXPECT_FALSE(groups_of({-1, 0, -1}, {3, 1, 2}).is_two_level());  // the last root has none
  EXPECT_FALSE(groups_of({-1, 0, 1}, {3, 1, 2}).is_two_level());   // depth 3
  EXPECT_FALSE(groups_of({-1, -1, 0}, {3, 1, 2}).is_two_level());  // a child apart from its root
  EXPECT_EQ(groups_of({-1, 0, 1}, {3, 1, 2}).num_groups(), 0);
  EXPECT_TRUE(groups_of({-1, 0, 0, -1, 3}, {3, 1, 2, 1, 1}).is_two_level());
}

}  // namespace
}  // namespace dualkv_test
