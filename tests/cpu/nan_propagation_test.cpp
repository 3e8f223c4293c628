// NaN in an input reaches exactly the outputs that depend on it and nothing else, without
// crashing: the library's NaN pattern must equal the fp64 oracle's on the same inputs, and the
// finite part must still match the oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <string>

#include "cpu/attention_problem.h"
#include "cpu/oracle_dense_mask.h"
#include "cpu/oracle_tree.h"
#include "cpu/test_support.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

// Only the finite elements are compared; the library computes in fp32 here.
constexpr double kFiniteTolerance = 1e-5;

enum class PoisonedInput { kQ, kK, kV, kDout };

struct NanCase {
  std::string name;
  PoisonedInput input;
  int64_t token;  // in the batch below: 0..3 prompt of group 0, 4..5 and 6..8 its responses;
                  // in the tree: segments 0..6 at tokens 0, 3, 5, 7, 8, 10, 12
  int64_t head;
  bool tree = false;
};

void PrintTo(const NanCase& nan_case, std::ostream* os) { *os << nan_case.name; }

// A root with a branch of two leaves and a leaf of its own, then a second tree of two segments.
const TreeSpec kNanTree{{-1, 0, 1, 1, 0, -1, 5}, {3, 2, 2, 1, 2, 2, 2}};

ProblemShape nan_shape(bool tree) {
  ProblemShape shape;
  shape.batch = {{4, {2, 3}}, {2, {1, 2}}};
  if (tree) shape.tree = kNanTree;
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 8;
  return shape;
}

int64_t count_nan(const DenseTensor& tensor) {
  int64_t nans = 0;
  for (double value : tensor.values) nans += std::isnan(value);
  return nans;
}

// Passes iff NaN sits in exactly the same elements of both tensors and the finite elements are
// close. Some outputs legitimately stay finite (V never reaches the LSE or dV).
::testing::AssertionResult same_nan_pattern_and_close(const DenseTensor& actual, const DenseTensor& expected) {
  DenseTensor finite_actual = actual, finite_expected = expected;
  for (size_t e = 0; e < expected.values.size(); ++e) {
    const bool expected_nan = std::isnan(expected.values[e]);
    if (std::isnan(actual.values[e]) != expected_nan) {
      return ::testing::AssertionFailure()
             << "element " << e << " is " << actual.values[e] << ", oracle " << expected.values[e];
    }
    if (expected_nan) finite_actual.values[e] = finite_expected.values[e] = 0.0;
  }
  return all_close(finite_actual, finite_expected, kFiniteTolerance);
}

class NanPropagation : public ::testing::TestWithParam<NanCase> {};

TEST_P(NanPropagation, ReachesExactlyTheDependentOutputs) {
  std::mt19937_64 rng = rng_for_current_test();
  const NanCase& nan_case = GetParam();
  AttentionProblem problem(nan_shape(nan_case.tree), rng);
  StridedTensor* poisoned = nullptr;
  switch (nan_case.input) {
    case PoisonedInput::kQ:
      poisoned = &problem.q;
      break;
    case PoisonedInput::kK:
      poisoned = &problem.k;
      break;
    case PoisonedInput::kV:
      poisoned = &problem.v;
      break;
    case PoisonedInput::kDout:
      poisoned = &problem.dout;
      break;
  }
  poisoned->write(nan_case.token, nan_case.head, 3, std::numeric_limits<double>::quiet_NaN());

  dualkv::forward(problem.layout(), problem.forward_params(dualkv::Accumulation::kFloat32));
  dualkv::backward(problem.layout(), problem.backward_params(dualkv::Accumulation::kFloat32));

  const BatchSpec& batch = nan_shape(false).batch;
  const DenseTensor q = to_dense(problem.q), k = to_dense(problem.k), v = to_dense(problem.v);
  const double scale = problem.softmax_scale;
  if (nan_case.input != PoisonedInput::kDout) {
    const oracle::ForwardResult expected = nan_case.tree ? oracle::tree_mask_forward(kNanTree, q, k, v, scale)
                                                         : oracle::dense_mask_forward(batch, q, k, v, scale);
    EXPECT_TRUE(same_nan_pattern_and_close(to_dense(problem.out), expected.out)) << "O";
    EXPECT_TRUE(same_nan_pattern_and_close(problem.lse.to_dense(), expected.lse)) << "LSE";
  }
  const DenseTensor dout = to_dense(problem.dout);
  const oracle::Gradients expected = nan_case.tree ? oracle::tree_mask_backward(kNanTree, q, k, v, dout, scale)
                                                   : oracle::dense_mask_backward(batch, q, k, v, dout, scale);
  EXPECT_TRUE(same_nan_pattern_and_close(to_dense(problem.dq), expected.dq)) << "dQ";
  EXPECT_TRUE(same_nan_pattern_and_close(to_dense(problem.dk), expected.dk)) << "dK";
  EXPECT_TRUE(same_nan_pattern_and_close(to_dense(problem.dv), expected.dv)) << "dV";
  // The case means something only if the NaN reaches some outputs but not all of them.
  const int64_t nan_gradients = count_nan(expected.dq) + count_nan(expected.dk) + count_nan(expected.dv);
  EXPECT_GT(nan_gradients, 0);
  EXPECT_LT(count_nan(expected.dq), static_cast<int64_t>(expected.dq.values.size()));
}

INSTANTIATE_TEST_SUITE_P(Inputs, NanPropagation,
                         ::testing::Values(NanCase{"QueryInResponse", PoisonedInput::kQ, 7, 2},
                                           NanCase{"QueryInPrompt", PoisonedInput::kQ, 1, 0},
                                           NanCase{"KeyInSharedPrompt", PoisonedInput::kK, 2, 1},
                                           NanCase{"KeyInResponse", PoisonedInput::kK, 5, 0},
                                           NanCase{"ValueInSharedPrompt", PoisonedInput::kV, 0, 0},
                                           NanCase{"ValueInSecondGroup", PoisonedInput::kV, 12, 1},
                                           NanCase{"OutputGradientInResponse", PoisonedInput::kDout, 8, 3},
                                           NanCase{"OutputGradientInPrompt", PoisonedInput::kDout, 3, 1},
                                           NanCase{"TreeKeyInALeaf", PoisonedInput::kK, 5, 0, true},
                                           NanCase{"TreeKeyInABranch", PoisonedInput::kK, 4, 1, true},
                                           NanCase{"TreeQueryInABranch", PoisonedInput::kQ, 3, 2, true},
                                           NanCase{"TreeValueInTheRoot", PoisonedInput::kV, 1, 0, true},
                                           NanCase{"TreeValueInTheSecondTree", PoisonedInput::kV, 11, 1, true},
                                           NanCase{"TreeOutputGradientInALeaf", PoisonedInput::kDout, 7, 3, true}),
                         [](const ::testing::TestParamInfo<NanCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dualkv_test
