#include "cpu/oracle_tree.h"

#include <cstddef>

namespace dualkv_test::oracle {

KeyMask tree_mask(const TreeSpec& tree) {
  const std::vector<int64_t> segment = segment_of_tokens(tree);
  const auto tokens = static_cast<int64_t>(segment.size());
  KeyMask mask(tokens);
  for (int64_t q = 0; q < tokens; ++q) {
    for (int64_t k = 0; k <= q; ++k) {
      if (is_ancestor_or_self(tree, segment[static_cast<size_t>(k)], segment[static_cast<size_t>(q)])) {
        mask.allow(q, k);
      }
    }
  }
  return mask;
}

ForwardResult tree_mask_forward(const TreeSpec& tree, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                                double scale) {
  return masked_attention_forward(q, k, v, tree_mask(tree), scale);
}

Gradients tree_mask_backward(const TreeSpec& tree, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                             const DenseTensor& dout, double scale) {
  return masked_attention_backward(q, k, v, dout, tree_mask(tree), scale);
}

std::vector<CopiedSequence> path_sequences(const TreeSpec& tree) {
  const size_t segments = tree.lengths.size();
  std::vector<int64_t> begin(segments, 0);
  std::vector<bool> has_child(segments, false);
  for (size_t s = 1; s < segments; ++s) begin[s] = begin[s - 1] + tree.lengths[s - 1];
  for (int64_t parent : tree.parents) {
    if (parent >= 0) has_child[static_cast<size_t>(parent)] = true;
  }
  std::vector<bool> scored(segments, false);
  std::vector<CopiedSequence> sequences;
  for (size_t leaf = 0; leaf < segments; ++leaf) {
    if (has_child[leaf]) continue;
    std::vector<int64_t> path;  // leaf to root
    for (auto s = static_cast<int64_t>(leaf); s >= 0; s = tree.parents[static_cast<size_t>(s)]) path.push_back(s);
    CopiedSequence sequence;
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const auto s = static_cast<size_t>(*it);
      for (int64_t t = 0; t < tree.lengths[s]; ++t) sequence.packed_rows.push_back(begin[s] + t);
    }
    // The scored suffix: the segments no earlier path scored.
    for (auto it = path.rbegin(); it != path.rend() && scored[static_cast<size_t>(*it)]; ++it) {
      sequence.scored_from += tree.lengths[static_cast<size_t>(*it)];
    }
    for (int64_t s : path) scored[static_cast<size_t>(s)] = true;
    sequences.push_back(sequence);
  }
  return sequences;
}

}  // namespace dualkv_test::oracle
