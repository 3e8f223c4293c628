// Scores far outside the comfortable range: very sharp softmax (exp would overflow fp32 without
// the running max) and a nearly flat one. The library must stay finite and match the oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>

#include "cpu/attention_problem.h"
#include "cpu/oracle_dense_mask.h"
#include "cpu/test_support.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

struct ScoreRange {
  std::string name;
  float scale;  // softmax scale; inputs are uniform in [-1, 1), so |scores| <= scale * head_dim
};

void PrintTo(const ScoreRange& range, std::ostream* os) { *os << range.name; }

// fp64 accumulation isolates the storage roundings: fp32 outputs, and in backward the fp32 LSE,
// whose rounding (|lse| * eps / 2) becomes a relative error of every probability of its row.
double tolerance(double max_abs_lse) { return 4 * dtype_epsilon(dualkv::DType::kFloat32) * (1.0 + max_abs_lse); }

class ScoreRanges : public ::testing::TestWithParam<ScoreRange> {};

TEST_P(ScoreRanges, MatchTheOracle) {
  ProblemShape shape;
  shape.batch = {{40, {30, 1, 70}}, {3, {5}}};
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 32;
  std::mt19937_64 rng = rng_for_current_test();
  AttentionProblem problem(shape, rng);
  problem.softmax_scale = GetParam().scale;
  dualkv::forward(problem.layout(), problem.forward_params(dualkv::Accumulation::kFloat64));
  dualkv::backward(problem.layout(), problem.backward_params(dualkv::Accumulation::kFloat64));

  const DenseTensor q = to_dense(problem.q), k = to_dense(problem.k), v = to_dense(problem.v);
  const oracle::ForwardResult expected = oracle::dense_mask_forward(shape.batch, q, k, v, problem.softmax_scale);
  double max_abs_lse = 0.0;
  for (double value : expected.lse.values) max_abs_lse = std::max(max_abs_lse, std::abs(value));
  const double allowed = tolerance(max_abs_lse);
  EXPECT_TRUE(all_close(to_dense(problem.out), expected.out, allowed)) << "O";
  EXPECT_TRUE(all_close(problem.lse.to_dense(), expected.lse, allowed)) << "LSE";
  const oracle::Gradients grads =
      oracle::dense_mask_backward(shape.batch, q, k, v, to_dense(problem.dout), problem.softmax_scale);
  EXPECT_TRUE(all_close(to_dense(problem.dq), grads.dq, allowed)) << "dQ";
  EXPECT_TRUE(all_close(to_dense(problem.dk), grads.dk, allowed)) << "dK";
  EXPECT_TRUE(all_close(to_dense(problem.dv), grads.dv, allowed)) << "dV";
}

INSTANTIATE_TEST_SUITE_P(Scales, ScoreRanges,
                         ::testing::Values(ScoreRange{"Sharp", 40.0f},  // scores in the hundreds
                                           ScoreRange{"Flat", 1e-6f}),  // every visible key weighted alike
                         [](const ::testing::TestParamInfo<ScoreRange>& info) { return info.param.name; });

}  // namespace
}  // namespace dualkv_test
