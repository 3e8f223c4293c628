#include "cpu/tree_spec.h"

#include <algorithm>
#include <functional>

namespace dualkv_test {

int64_t tree_token_count(const TreeSpec& tree) {
  int64_t total = 0;
  for (int64_t length : tree.lengths) total += length;
  return total;
}

std::vector<int64_t> segment_of_tokens(const TreeSpec& tree) {
  std::vector<int64_t> segments;
  for (size_t s = 0; s < tree.lengths.size(); ++s) {
    segments.insert(segments.end(), static_cast<size_t>(tree.lengths[s]), static_cast<int64_t>(s));
  }
  return segments;
}

bool is_ancestor_or_self(const TreeSpec& tree, int64_t ancestor, int64_t segment) {
  for (int64_t s = segment; s >= 0; s = tree.parents[static_cast<size_t>(s)]) {
    if (s == ancestor) return true;
  }
  return false;
}

TreeSpec tree_of(const BatchSpec& batch) {
  TreeSpec tree;
  for (const GroupLengths& group : batch) {
    const auto prompt = static_cast<int64_t>(tree.parents.size());
    tree.parents.push_back(-1);
    tree.lengths.push_back(group.prompt);
    for (int64_t length : group.responses) {
      tree.parents.push_back(prompt);
      tree.lengths.push_back(length);
    }
  }
  return tree;
}

TreeSpec random_tree(const TreeShape& shape, std::mt19937_64& rng) {
  // Nodes in creation order with their parent node (-1 for roots) and children.
  std::vector<int64_t> parent_of;
  std::vector<std::vector<int64_t>> children;
  std::uniform_int_distribution<int> child_count(0, shape.max_children);
  std::function<void(int64_t, int, bool)> grow = [&](int64_t parent, int depth, bool reach_depth) {
    const auto node = static_cast<int64_t>(parent_of.size());
    parent_of.push_back(parent);
    children.emplace_back();
    if (parent >= 0) children[static_cast<size_t>(parent)].push_back(node);
    if (depth == shape.max_depth) return;
    const int drawn = static_cast<int>(parent_of.size()) < shape.max_segments ? child_count(rng) : 0;
    const int count = std::max(drawn, reach_depth ? 1 : 0);
    for (int c = 0; c < count; ++c) grow(node, depth + 1, reach_depth && c == 0);
  };
  for (int r = 0; r < shape.roots; ++r) grow(-1, 1, r == 0);

  // Packed order: depth-first (creation order is a preorder), or a random topological order.
  std::vector<int64_t> order;
  if (shape.depth_first) {
    for (size_t n = 0; n < parent_of.size(); ++n) order.push_back(static_cast<int64_t>(n));
  } else {
    std::vector<int64_t> ready;
    for (size_t n = 0; n < parent_of.size(); ++n) {
      if (parent_of[n] < 0) ready.push_back(static_cast<int64_t>(n));
    }
    while (!ready.empty()) {
      std::uniform_int_distribution<size_t> pick(0, ready.size() - 1);
      const size_t i = pick(rng);
      const int64_t node = ready[i];
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(i));
      order.push_back(node);
      for (int64_t child : children[static_cast<size_t>(node)]) ready.push_back(child);
    }
  }
  std::vector<int64_t> index_of(parent_of.size());
  for (size_t i = 0; i < order.size(); ++i) index_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  TreeSpec tree;
  std::uniform_int_distribution<int> length(1, shape.max_length);
  std::bernoulli_distribution single(shape.single_token);
  for (int64_t node : order) {
    const int64_t parent = parent_of[static_cast<size_t>(node)];
    tree.parents.push_back(parent < 0 ? -1 : index_of[static_cast<size_t>(parent)]);
    tree.lengths.push_back(single(rng) ? 1 : length(rng));
  }
  return tree;
}

}  // namespace dualkv_test
