// The oracles judged on their own, before they judge the library: the dense-mask oracle and the
// N-copy oracle must agree to fp64 rounding (the deduplication identity the layout rests on),
// and the oracle's analytic gradients must match central differences of its forward pass.
#include <gtest/gtest.h>

#include <random>

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"
#include "cpu/oracle_dense_mask.h"
#include "cpu/oracle_ncopy.h"
#include "cpu/test_support.h"

namespace dualkv_test {
namespace {

using oracle::DenseTensor;

// fp64 agreement between two exact computations of the same quantity in different orders.
constexpr double kFp64Agreement = 1e-12;
// Central differences with step kStep: truncation error ~ kStep^2, rounding ~ 1e-16 / kStep.
constexpr double kStep = 1e-5;
constexpr double kFiniteDifferenceAgreement = 1e-7;

DenseTensor random_dense(int64_t tokens, int64_t heads, int64_t dim, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  DenseTensor tensor(tokens, heads, dim);
  for (double& value : tensor.values) value = uniform(rng);
  return tensor;
}

double weighted_sum(const DenseTensor& out, const DenseTensor& weights) {
  double sum = 0.0;
  for (size_t e = 0; e < out.values.size(); ++e) sum += out.values[e] * weights.values[e];
  return sum;
}

struct OracleProblem {
  BatchSpec batch;
  DenseTensor q, k, v, dout;
  double scale = 0.9;
};

// GQA ratio 3, several groups, P = 1 and R = 1 among them.
OracleProblem random_problem(std::mt19937_64& rng) {
  OracleProblem problem;
  problem.batch = {{4, {3, 1, 5}}, {1, {2}}, {3, {1, 1}}};
  const int64_t tokens = packed_token_count(problem.batch);
  problem.q = random_dense(tokens, 6, 5, rng);
  problem.k = random_dense(tokens, 2, 5, rng);
  problem.v = random_dense(tokens, 2, 5, rng);
  problem.dout = random_dense(tokens, 6, 5, rng);
  return problem;
}

TEST(Oracles, DenseMaskAndNCopyAgree) {
  std::mt19937_64 rng = rng_for_current_test();
  const OracleProblem p = random_problem(rng);
  const oracle::ForwardResult dense = oracle::dense_mask_forward(p.batch, p.q, p.k, p.v, p.scale);
  const oracle::ForwardResult ncopy = oracle::ncopy_forward(p.batch, p.q, p.k, p.v, p.scale);
  EXPECT_TRUE(all_close(ncopy.out, dense.out, kFp64Agreement));
  EXPECT_TRUE(all_close(ncopy.lse, dense.lse, kFp64Agreement));
  const oracle::Gradients dense_grads = oracle::dense_mask_backward(p.batch, p.q, p.k, p.v, p.dout, p.scale);
  const oracle::Gradients ncopy_grads = oracle::ncopy_backward(p.batch, p.q, p.k, p.v, p.dout, p.scale);
  EXPECT_TRUE(all_close(ncopy_grads.dq, dense_grads.dq, kFp64Agreement));
  EXPECT_TRUE(all_close(ncopy_grads.dk, dense_grads.dk, kFp64Agreement));
  EXPECT_TRUE(all_close(ncopy_grads.dv, dense_grads.dv, kFp64Agreement));
}

TEST(Oracles, PackedMaskFollowsTheDefinition) {
  // Two groups: [p p | a a | b] and [P | c c]. Spelled out by hand from the visibility rule.
  const BatchSpec batch = {{2, {2, 1}}, {1, {2}}};
  const oracle::KeyMask mask = oracle::packed_mask(batch);
  const char* expected[] = {
      "1.......",  // p0
      "11......",  // p1
      "111.....",  // a0: prompt + itself
      "1111....",  // a1
      "11..1...",  // b0: prompt + itself, not response a
      ".....1..",  // P0: its own group only
      ".....11.",  // c0
      ".....111",  // c1
  };
  ASSERT_EQ(mask.size(), 8);
  for (int64_t q = 0; q < 8; ++q) {
    for (int64_t k = 0; k < 8; ++k) {
      EXPECT_EQ(mask.visible(q, k), expected[q][k] == '1') << "query " << q << ", key " << k;
    }
  }
}

TEST(Oracles, GradientsMatchCentralDifferences) {
  std::mt19937_64 rng = rng_for_current_test();
  OracleProblem p = random_problem(rng);
  const oracle::Gradients grads = oracle::dense_mask_backward(p.batch, p.q, p.k, p.v, p.dout, p.scale);
  auto loss = [&] { return weighted_sum(oracle::dense_mask_forward(p.batch, p.q, p.k, p.v, p.scale).out, p.dout); };
  auto central_differences = [&](DenseTensor& input) {
    DenseTensor numeric(input.tokens, input.heads, input.dim);
    for (size_t e = 0; e < input.values.size(); ++e) {
      const double original = input.values[e];
      input.values[e] = original + kStep;
      const double above = loss();
      input.values[e] = original - kStep;
      const double below = loss();
      input.values[e] = original;
      numeric.values[e] = (above - below) / (2 * kStep);
    }
    return numeric;
  };
  EXPECT_TRUE(all_close(grads.dq, central_differences(p.q), kFiniteDifferenceAgreement));
  EXPECT_TRUE(all_close(grads.dk, central_differences(p.k), kFiniteDifferenceAgreement));
  EXPECT_TRUE(all_close(grads.dv, central_differences(p.v), kFiniteDifferenceAgreement));
}

}  // namespace
}  // namespace dualkv_test
