// A complete random attention problem in the packed layout: caller-style buffers in one of
// several memory layouts, the matching dualkv parameter structs, and the fp64 copies of the
// stored (already dtype-rounded) inputs that the oracles consume.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/test_support.h"
#include "cpu/tree_spec.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {

// How the caller's tensors sit in memory.
enum class ViewKind {
  kContiguous,  // (T, H, d) each
  kFusedQkv,    // q, k, v (and dq, dk, dv) are head slices of one fused (T, H + 2 Hk, d) buffer
  kHeadMajor,   // (H, T, d) each: token stride d, head stride T d
  kPadded,      // (T, H, d) with gaps between heads and between tokens, LSE rows padded too
};

const char* view_kind_name(ViewKind kind);

struct ProblemShape {
  BatchSpec batch;
  TreeSpec tree;  // when it has segments, the layout is this tree and `batch` is unused
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 1;
  dualkv::DType dtype = dualkv::DType::kFloat32;
  ViewKind views = ViewKind::kContiguous;
};

class AttentionProblem {
 public:
  // Inputs (q, k, v, dout) are uniform in [-1, 1); outputs are poisoned.
  AttentionProblem(const ProblemShape& shape, std::mt19937_64& rng);

  const ProblemShape& shape() const { return shape_; }
  const dualkv::Layout& layout() const { return layout_; }
  int64_t total_tokens() const { return layout_.total_tokens(); }

  dualkv::ForwardParams forward_params(dualkv::Accumulation accumulation);
  dualkv::BackwardParams backward_params(dualkv::Accumulation accumulation);

  void poison_outputs();
  // Byte copies of every buffer that forward (q, k, v, dout) or backward (those plus out and
  // lse) only reads, to compare before and after a call.
  std::vector<std::vector<unsigned char>> snapshot_forward_inputs() const;
  std::vector<std::vector<unsigned char>> snapshot_backward_inputs() const;
  // Output elements outside the output views that were written (must stay 0).
  int64_t count_written_outside_outputs() const;

  float softmax_scale = 0.0f;
  StridedTensor q, k, v, dout;
  StridedTensor out, dq, dk, dv;
  LseBuffer lse;

 private:
  ProblemShape shape_;
  dualkv::Layout layout_;
};

}  // namespace dualkv_test
