// Oracles of tree layouts (layout.h), from the parents and lengths alone:
//   (a) a dense T x T mask from the definition: query q sees key k iff k <= q and k's segment is
//       q's or one of its ancestors;
//   (b) every root-to-leaf path run alone as an ordinary causal sequence (the per-trajectory
//       N-copy computation), mapped back to the packed rows: a segment's outputs come from the
//       first path (in leaf order) that holds it; the paths that hold it again carry no output
//       gradient on its rows, so its dK/dV are its own gradient plus the sum over every
//       descendant's use of it.
#pragma once

#include <vector>

#include "cpu/oracle_attention.h"
#include "cpu/oracle_ncopy.h"
#include "cpu/tree_spec.h"

namespace dualkv_test::oracle {

KeyMask tree_mask(const TreeSpec& tree);

ForwardResult tree_mask_forward(const TreeSpec& tree, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                                double scale);
Gradients tree_mask_backward(const TreeSpec& tree, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                             const DenseTensor& dout, double scale);

// The root-to-leaf paths as copied sequences: packed rows along the path, the rows of segments an
// earlier path already scored before scored_from (they are a prefix: an earlier path holding a
// segment holds all its ancestors). Run them with sequences_forward / sequences_backward
// (oracle_ncopy.h).
std::vector<CopiedSequence> path_sequences(const TreeSpec& tree);

}  // namespace dualkv_test::oracle
