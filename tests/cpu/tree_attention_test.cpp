// Tree layouts (multi-turn and branching rollouts) through the CPU path, forward and backward,
// against both tree oracles on the same dtype-rounded inputs: the dense mask from the definition
// and every root-to-leaf path run alone. Random forests of depth 1 to 16, ragged, with one-token
// segments, several roots, packed depth-first and in other orders that keep parents first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cpu/attention_problem.h"
#include "cpu/error_budget.h"
#include "cpu/oracle_tree.h"
#include "cpu/test_support.h"
#include "cpu/tree_spec.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

using dualkv::Accumulation;
using dualkv::DType;

// The error budget of error_budget.h, the longest path being the longest sum of visible keys.
int64_t longest_path(const TreeSpec& tree) {
  std::vector<int64_t> path_end(tree.lengths.size());
  int64_t longest = 0;
  for (size_t s = 0; s < tree.lengths.size(); ++s) {
    const int64_t parent = tree.parents[s];
    path_end[s] = (parent < 0 ? 0 : path_end[static_cast<size_t>(parent)]) + tree.lengths[s];
    longest = std::max(longest, path_end[s]);
  }
  return longest;
}

double accumulation_error(const ProblemShape& shape, Accumulation accumulation) {
  return dualkv_test::accumulation_error(std::max(longest_path(shape.tree), shape.head_dim), accumulation);
}

struct TreeCase {
  std::string name;
  TreeShape tree;
  DType dtype;
  Accumulation accumulation;
};

void PrintTo(const TreeCase& tree_case, std::ostream* os) { *os << tree_case.name; }

std::vector<TreeCase> tree_cases() {
  const std::vector<std::pair<std::string, TreeShape>> shapes = {
      {"Depth1_SeveralRoots", TreeShape{1, 0, 5, 70, 0.2, true, 30}},
      {"Depth2_Ragged", TreeShape{2, 5, 2, 40, 0.3, true, 30}},
      {"Depth4_DepthFirst", TreeShape{4, 3, 2, 30, 0.2, true, 30}},
      {"Depth4_OtherOrder", TreeShape{4, 3, 2, 30, 0.2, false, 30}},
      {"Depth8_OtherOrder", TreeShape{8, 2, 3, 20, 0.3, false, 30}},
      {"Depth16_DepthFirst", TreeShape{16, 2, 1, 12, 0.4, true, 40}},
      {"Depth16_OtherOrder", TreeShape{16, 2, 2, 12, 0.4, false, 40}},
      {"SingleTokenSegments", TreeShape{10, 3, 2, 1, 1.0, true, 60}},
      {"AroundBlockEdges", TreeShape{3, 2, 1, 140, 0.1, true, 8}},
  };
  const std::vector<std::pair<DType, Accumulation>> precisions = {
      {DType::kFloat32, Accumulation::kFloat32},
      {DType::kFloat32, Accumulation::kFloat64},
      {DType::kBFloat16, Accumulation::kFloat32},
  };
  std::vector<TreeCase> cases;
  for (const auto& [name, shape] : shapes) {
    for (const auto& [dtype, accumulation] : precisions) {
      cases.push_back(
          {name + "_" + dualkv::dtype_name(dtype) + (accumulation == Accumulation::kFloat64 ? "_Acc64" : "_Acc32"),
           shape, dtype, accumulation});
    }
  }
  return cases;
}

class TreeAttention : public ::testing::TestWithParam<TreeCase> {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = rng_for_current_test();
    shape_.tree = random_tree(GetParam().tree, rng);
    shape_.heads = 4;
    shape_.kv_heads = 2;
    shape_.head_dim = 16;
    shape_.dtype = GetParam().dtype;
    shape_.views = ViewKind::kFusedQkv;
    problem_ = std::make_unique<AttentionProblem>(shape_, rng);
    q_ = to_dense(problem_->q);
    k_ = to_dense(problem_->k);
    v_ = to_dense(problem_->v);
  }

  ProblemShape shape_;
  std::unique_ptr<AttentionProblem> problem_;
  DenseTensor q_, k_, v_;
};

TEST_P(TreeAttention, TheRandomTreeHasTheRequestedDepth) {
  EXPECT_EQ(problem_->layout().depth(), GetParam().tree.max_depth);
}

TEST_P(TreeAttention, ForwardMatchesBothOracles) {
  const auto inputs_before = problem_->snapshot_forward_inputs();
  dualkv::forward(problem_->layout(), problem_->forward_params(GetParam().accumulation));
  EXPECT_TRUE(inputs_before == problem_->snapshot_forward_inputs()) << "forward modified an input";
  EXPECT_EQ(problem_->count_written_outside_outputs(), 0) << "wrote outside the output views";
  const DenseTensor out = to_dense(problem_->out);
  const DenseTensor lse = problem_->lse.to_dense();
  const double accumulation = accumulation_error(shape_, GetParam().accumulation);
  const double out_tolerance = kStorageRoundings * dtype_epsilon(shape_.dtype) + accumulation;
  const double lse_tolerance = kStorageRoundings * dtype_epsilon(DType::kFloat32) + accumulation;
  const double scale = problem_->softmax_scale;
  const oracle::ForwardResult dense = oracle::tree_mask_forward(shape_.tree, q_, k_, v_, scale);
  EXPECT_TRUE(all_close(out, dense.out, out_tolerance)) << "O vs dense-mask oracle";
  EXPECT_TRUE(all_close(lse, dense.lse, lse_tolerance)) << "LSE vs dense-mask oracle";
  const oracle::ForwardResult paths = oracle::sequences_forward(oracle::path_sequences(shape_.tree), q_, k_, v_, scale);
  EXPECT_TRUE(all_close(out, paths.out, out_tolerance)) << "O vs paths run alone";
  EXPECT_TRUE(all_close(lse, paths.lse, lse_tolerance)) << "LSE vs paths run alone";
}

TEST_P(TreeAttention, BackwardMatchesBothOracles) {
  dualkv::forward(problem_->layout(), problem_->forward_params(GetParam().accumulation));
  const auto inputs_before = problem_->snapshot_backward_inputs();
  dualkv::backward(problem_->layout(), problem_->backward_params(GetParam().accumulation));
  EXPECT_TRUE(inputs_before == problem_->snapshot_backward_inputs()) << "backward modified an input";
  EXPECT_EQ(problem_->count_written_outside_outputs(), 0) << "wrote outside the output views";
  const DenseTensor dq = to_dense(problem_->dq), dk = to_dense(problem_->dk), dv = to_dense(problem_->dv);
  const DenseTensor dout = to_dense(problem_->dout);
  const double tolerance = kBackwardStorageRoundings * dtype_epsilon(shape_.dtype) +
                           accumulation_error(shape_, GetParam().accumulation) +
                           kLseRoundings * dtype_epsilon(DType::kFloat32) * max_abs(problem_->lse.to_dense());
  const double scale = problem_->softmax_scale;
  const oracle::Gradients dense = oracle::tree_mask_backward(shape_.tree, q_, k_, v_, dout, scale);
  EXPECT_TRUE(all_close(dq, dense.dq, tolerance)) << "dQ vs dense-mask oracle";
  EXPECT_TRUE(all_close(dk, dense.dk, tolerance)) << "dK vs dense-mask oracle";
  EXPECT_TRUE(all_close(dv, dense.dv, tolerance)) << "dV vs dense-mask oracle";
  const oracle::Gradients paths =
      oracle::sequences_backward(oracle::path_sequences(shape_.tree), q_, k_, v_, dout, scale);
  EXPECT_TRUE(all_close(dq, paths.dq, tolerance)) << "dQ vs paths run alone";
  EXPECT_TRUE(all_close(dk, paths.dk, tolerance)) << "dK vs paths run alone (shared segments: sum over paths)";
  EXPECT_TRUE(all_close(dv, paths.dv, tolerance)) << "dV vs paths run alone (shared segments: sum over paths)";
}

INSTANTIATE_TEST_SUITE_P(Forests, TreeAttention, ::testing::ValuesIn(tree_cases()),
                         [](const ::testing::TestParamInfo<TreeCase>& info) { return info.param.name; });

// A two-level batch given as a tree is the same layout as from its lengths, and the CPU path
// gives bitwise the same results on it.
TEST(TreeAttention, TwoLevelTreeIsTheGroupLayout) {
  std::mt19937_64 rng = rng_for_current_test();
  ProblemShape shape;
  shape.batch = {{70, {65, 3, 1}}, {9, {130}}, {1, {1, 2}}};
  shape.heads = 4;
  shape.kv_heads = 1;
  shape.head_dim = 32;
  AttentionProblem groups(shape, rng);
  shape.tree = tree_of(shape.batch);
  AttentionProblem tree(shape, rng);
  ASSERT_TRUE(tree.layout().is_two_level());
  EXPECT_EQ(tree.layout().cu_groups(), groups.layout().cu_groups());
  EXPECT_EQ(tree.layout().cu_seqlens(), groups.layout().cu_seqlens());
  EXPECT_EQ(tree.layout().parents(), groups.layout().parents());
  for (StridedTensor* input : {&tree.q, &tree.k, &tree.v, &tree.dout}) {
    const StridedTensor& source = input == &tree.q   ? groups.q
                                  : input == &tree.k ? groups.k
                                  : input == &tree.v ? groups.v
                                                     : groups.dout;
    *input->storage = *source.storage;
  }
  for (AttentionProblem* problem : {&groups, &tree}) {
    dualkv::forward(problem->layout(), problem->forward_params(Accumulation::kFloat32));
    dualkv::backward(problem->layout(), problem->backward_params(Accumulation::kFloat32));
  }
  for (const auto& [a, b] :
       {std::pair{&groups.out, &tree.out}, {&groups.dq, &tree.dq}, {&groups.dk, &tree.dk}, {&groups.dv, &tree.dv}}) {
    EXPECT_TRUE(a->storage->bytes() == b->storage->bytes());
  }
  EXPECT_EQ(std::memcmp(groups.lse.values.data(), tree.lse.values.data(), groups.lse.values.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace dualkv_test
