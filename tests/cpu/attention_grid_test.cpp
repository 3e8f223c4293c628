// The shape/dtype grid: forward and backward of the library against both fp64 oracles (dense
// mask over the packed tensor, and causal attention over the explicit N-copy layout), on the
// same dtype-rounded inputs, with strided caller layouts, poisoned outputs and unmodified inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "cpu/attention_problem.h"
#include "cpu/error_budget.h"
#include "cpu/oracle_dense_mask.h"
#include "cpu/oracle_ncopy.h"
#include "cpu/test_support.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

using dualkv::Accumulation;
using dualkv::DType;

int64_t longest_sum(const ProblemShape& shape) {
  int64_t longest_keys = 0;
  for (const GroupLengths& group : shape.batch) {
    for (int64_t response : group.responses) {
      longest_keys = std::max(longest_keys, group.prompt + response);
    }
  }
  return std::max(longest_keys, shape.head_dim);
}

double accumulation_error(const ProblemShape& shape, Accumulation accumulation) {
  return dualkv_test::accumulation_error(longest_sum(shape), accumulation);
}

struct GridCase {
  std::string name;
  ProblemShape shape;
  Accumulation accumulation;
};

void PrintTo(const GridCase& grid_case, std::ostream* os) { *os << grid_case.name; }

ProblemShape shape_of(BatchSpec batch, int64_t heads, int64_t kv_heads, int64_t head_dim, ViewKind views) {
  ProblemShape shape;
  shape.batch = std::move(batch);
  shape.heads = heads;
  shape.kv_heads = kv_heads;
  shape.head_dim = head_dim;
  shape.views = views;
  return shape;
}

std::vector<GridCase> grid_cases() {
  // Together: several groups with different P and N, ragged R with R = 1 and P = 1, GQA ratios
  // 1, 4 and 8, head dims 1, 17, 64, 96, 128 and 256, lengths 127 and 129 around tile edges,
  // lengths around the CPU path's 64-token blocks and 256-token staging, and every view kind.
  const std::vector<std::pair<std::string, ProblemShape>> shapes = {
      {"MixedGroups_Gqa1_D64_Contiguous",
       shape_of({{5, {3, 1, 7}}, {1, {4}}, {17, {1, 1, 2, 9}}}, 2, 2, 64, ViewKind::kContiguous)},
      {"RaggedGroups_Gqa4_D96_FusedQkv", shape_of({{12, {1, 20, 5}}, {3, {2, 1}}}, 8, 2, 96, ViewKind::kFusedQkv)},
      {"ManyResponses_Gqa8_D128_HeadMajor", shape_of({{9, {6, 1, 13, 2}}, {1, {1}}}, 8, 1, 128, ViewKind::kHeadMajor)},
      {"TwoGroups_Gqa2_D256_Padded", shape_of({{7, {5, 2}}, {4, {3}}}, 2, 1, 256, ViewKind::kPadded)},
      {"AwkwardLengths_Gqa2_D17_Padded", shape_of({{127, {129, 1}}, {1, {17}}}, 4, 2, 17, ViewKind::kPadded)},
      {"HeadDim1_Gqa1_Contiguous", shape_of({{17, {1, 2}}, {2, {3}}}, 4, 4, 1, ViewKind::kContiguous)},
      {"LongPrompt_Gqa4_D128_FusedQkv", shape_of({{150, {70, 1, 33}}}, 4, 1, 128, ViewKind::kFusedQkv)},
      {"MinimalGroups_SingleHead_D32_Padded", shape_of({{1, {1}}, {1, {1, 1}}}, 1, 1, 32, ViewKind::kPadded)},
      {"StagingEdges_Gqa4_D64_HeadMajor", shape_of({{257, {255, 1, 64}}, {63, {65}}}, 4, 1, 64, ViewKind::kHeadMajor)},
  };
  const std::vector<std::pair<DType, Accumulation>> precisions = {
      {DType::kFloat32, Accumulation::kFloat32},
      {DType::kFloat32, Accumulation::kFloat64},
      {DType::kFloat16, Accumulation::kFloat32},
      {DType::kBFloat16, Accumulation::kFloat32},
  };
  std::vector<GridCase> cases;
  for (const auto& [shape_name, shape] : shapes) {
    for (const auto& [dtype, accumulation] : precisions) {
      GridCase grid_case{
          shape_name + "_" + dualkv::dtype_name(dtype) + (accumulation == Accumulation::kFloat64 ? "_Acc64" : "_Acc32"),
          shape, accumulation};
      grid_case.shape.dtype = dtype;
      cases.push_back(grid_case);
    }
  }
  return cases;
}

class AttentionGrid : public ::testing::TestWithParam<GridCase> {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = rng_for_current_test();
    problem_ = std::make_unique<AttentionProblem>(GetParam().shape, rng);
    q_ = to_dense(problem_->q);
    k_ = to_dense(problem_->k);
    v_ = to_dense(problem_->v);
  }

  void run_forward() {
    const auto inputs_before = problem_->snapshot_forward_inputs();
    dualkv::forward(problem_->layout(), problem_->forward_params(GetParam().accumulation));
    EXPECT_TRUE(inputs_before == problem_->snapshot_forward_inputs()) << "forward modified an input";
  }

  void run_backward() {
    const auto inputs_before = problem_->snapshot_backward_inputs();
    dualkv::backward(problem_->layout(), problem_->backward_params(GetParam().accumulation));
    EXPECT_TRUE(inputs_before == problem_->snapshot_backward_inputs()) << "backward modified an input";
  }

  const BatchSpec& batch() const { return GetParam().shape.batch; }
  double scale() const { return problem_->softmax_scale; }

  std::unique_ptr<AttentionProblem> problem_;
  DenseTensor q_, k_, v_;
};

TEST_P(AttentionGrid, ForwardMatchesBothOracles) {
  run_forward();
  EXPECT_EQ(problem_->count_written_outside_outputs(), 0) << "wrote outside the output views";
  const DenseTensor out = to_dense(problem_->out);
  const DenseTensor lse = problem_->lse.to_dense();

  const ProblemShape& shape = GetParam().shape;
  const double accumulation = accumulation_error(shape, GetParam().accumulation);
  const double out_tolerance = kStorageRoundings * dtype_epsilon(shape.dtype) + accumulation;
  const double lse_tolerance = kStorageRoundings * dtype_epsilon(DType::kFloat32) + accumulation;
  const oracle::ForwardResult dense = oracle::dense_mask_forward(batch(), q_, k_, v_, scale());
  EXPECT_TRUE(all_close(out, dense.out, out_tolerance)) << "O vs dense-mask oracle";
  EXPECT_TRUE(all_close(lse, dense.lse, lse_tolerance)) << "LSE vs dense-mask oracle";
  const oracle::ForwardResult ncopy = oracle::ncopy_forward(batch(), q_, k_, v_, scale());
  EXPECT_TRUE(all_close(out, ncopy.out, out_tolerance)) << "O vs N-copy oracle";
  EXPECT_TRUE(all_close(lse, ncopy.lse, lse_tolerance)) << "LSE vs N-copy oracle";
}

TEST_P(AttentionGrid, BackwardMatchesBothOracles) {
  run_forward();
  run_backward();
  EXPECT_EQ(problem_->count_written_outside_outputs(), 0) << "wrote outside the output views";
  const DenseTensor dq = to_dense(problem_->dq);
  const DenseTensor dk = to_dense(problem_->dk);
  const DenseTensor dv = to_dense(problem_->dv);
  const DenseTensor dout = to_dense(problem_->dout);

  const ProblemShape& shape = GetParam().shape;
  const double grad_tolerance = kBackwardStorageRoundings * dtype_epsilon(shape.dtype) +
                                accumulation_error(shape, GetParam().accumulation) +
                                kLseRoundings * dtype_epsilon(DType::kFloat32) * max_abs(problem_->lse.to_dense());
  const oracle::Gradients dense = oracle::dense_mask_backward(batch(), q_, k_, v_, dout, scale());
  EXPECT_TRUE(all_close(dq, dense.dq, grad_tolerance)) << "dQ vs dense-mask oracle";
  EXPECT_TRUE(all_close(dk, dense.dk, grad_tolerance)) << "dK vs dense-mask oracle";
  EXPECT_TRUE(all_close(dv, dense.dv, grad_tolerance)) << "dV vs dense-mask oracle";
  const oracle::Gradients ncopy = oracle::ncopy_backward(batch(), q_, k_, v_, dout, scale());
  EXPECT_TRUE(all_close(dq, ncopy.dq, grad_tolerance)) << "dQ vs N-copy oracle";
  EXPECT_TRUE(all_close(dk, ncopy.dk, grad_tolerance)) << "dK vs N-copy oracle (prompt: sum of copies)";
  EXPECT_TRUE(all_close(dv, ncopy.dv, grad_tolerance)) << "dV vs N-copy oracle (prompt: sum of copies)";
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionGrid, ::testing::ValuesIn(grid_cases()),
                         [](const ::testing::TestParamInfo<GridCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dualkv_test
