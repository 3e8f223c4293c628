// Plain description of a tree layout by its parents and lengths, shared by the tree oracles and
// tests, and random trees of the shapes multi-turn rollouts take.
//
// Like batch_spec.h it does not use dualkv::Layout: the oracles derive token positions and
// ancestry from these arrays on their own.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "cpu/batch_spec.h"

namespace dualkv_test {

struct TreeSpec {
  std::vector<int64_t> parents;  // per segment in packed order: the parent's index (< own) or -1
  std::vector<int64_t> lengths;  // per segment: its tokens
};

int64_t tree_token_count(const TreeSpec& tree);

// The segment of every token, in packed order.
std::vector<int64_t> segment_of_tokens(const TreeSpec& tree);

// Whether segment `ancestor` is `segment` or one of its ancestors.
bool is_ancestor_or_self(const TreeSpec& tree, int64_t ancestor, int64_t segment);

// The two-level layout of `batch` as a tree: each prompt a root, its responses its children.
TreeSpec tree_of(const BatchSpec& batch);

struct TreeShape {
  int max_depth = 4;          // segments on the longest root-to-leaf path
  int max_children = 3;       // per segment
  int roots = 1;              // trees in the forest
  int max_length = 40;        // tokens per segment, drawn from [1, max_length]
  double single_token = 0.2;  // probability that a segment has exactly one token
  bool depth_first = true;    // packed order depth-first (every subtree contiguous), else random
  int max_segments = 40;      // no more children once this many segments exist (but the chain
                              // that reaches max_depth)
};

// A random forest: each segment below max_depth gets 0..max_children children while there are
// fewer than max_segments (the first root a chain to max_depth, so the depth is reached), packed
// depth-first or in a random order that keeps every parent before its children.
TreeSpec random_tree(const TreeShape& shape, std::mt19937_64& rng);

}  // namespace dualkv_test
