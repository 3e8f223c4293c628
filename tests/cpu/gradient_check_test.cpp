// The library's backward pass against central differences of the library's own forward pass, in
// fp64 accumulation: an oracle-free check that backward is the derivative of forward, for the
// scalar loss sum(O * W) with random W (passed to backward as dout).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/attention_problem.h"
#include "cpu/test_support.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

// Inputs and outputs stay fp32, so the loss carries fp32 rounding of O (~1e-7 relative per
// element) that the difference quotient divides by 2 * kStep, while the truncation error grows
// as kStep^2; 1e-2 balances the two near 1e-5, well inside the tolerance.
constexpr double kStep = 1e-2;
constexpr double kFiniteDifferenceAgreement = 1e-3;

class GradientCheck : public ::testing::TestWithParam<ViewKind> {};

TEST_P(GradientCheck, BackwardIsTheDerivativeOfForward) {
  ProblemShape shape;
  shape.batch = {{3, {2, 1, 4}}, {1, {1, 2}}};  // P = 1 and R = 1; a prompt shared 3 ways
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 5;
  shape.views = GetParam();
  std::mt19937_64 rng = rng_for_current_test();
  AttentionProblem problem(shape, rng);

  auto forward = [&] {
    dualkv::ForwardParams params = problem.forward_params(dualkv::Accumulation::kFloat64);
    params.options.cpu_threads = 1;  // hundreds of tiny runs: thread start-up would dominate
    dualkv::forward(problem.layout(), params);
  };
  const DenseTensor weights = to_dense(problem.dout);
  auto loss = [&] {
    forward();
    const DenseTensor out = to_dense(problem.out);
    double sum = 0.0;
    for (size_t e = 0; e < out.values.size(); ++e) sum += out.values[e] * weights.values[e];
    return sum;
  };

  forward();
  dualkv::backward(problem.layout(), problem.backward_params(dualkv::Accumulation::kFloat64));
  const DenseTensor dq = to_dense(problem.dq), dk = to_dense(problem.dk), dv = to_dense(problem.dv);

  // Steps are taken on the stored fp32 values and divided by the step actually stored.
  auto central_differences = [&](StridedTensor& input) {
    DenseTensor numeric(input.tokens, input.heads, input.head_dim);
    for (int64_t t = 0; t < input.tokens; ++t) {
      for (int64_t h = 0; h < input.heads; ++h) {
        for (int64_t i = 0; i < input.head_dim; ++i) {
          const double original = input.read(t, h, i);
          input.write(t, h, i, original + kStep);
          const double above_x = input.read(t, h, i);
          const double above = loss();
          input.write(t, h, i, original - kStep);
          const double below_x = input.read(t, h, i);
          const double below = loss();
          input.write(t, h, i, original);
          numeric.at(t, h, i) = (above - below) / (above_x - below_x);
        }
      }
    }
    return numeric;
  };
  EXPECT_TRUE(all_close(dq, central_differences(problem.q), kFiniteDifferenceAgreement)) << "dQ";
  EXPECT_TRUE(all_close(dk, central_differences(problem.k), kFiniteDifferenceAgreement)) << "dK";
  EXPECT_TRUE(all_close(dv, central_differences(problem.v), kFiniteDifferenceAgreement)) << "dV";
}

INSTANTIATE_TEST_SUITE_P(Views, GradientCheck, ::testing::Values(ViewKind::kContiguous, ViewKind::kFusedQkv),
                         [](const ::testing::TestParamInfo<ViewKind>& info) {
                           return std::string(view_kind_name(info.param));
                         });

}  // namespace
}  // namespace dualkv_test
