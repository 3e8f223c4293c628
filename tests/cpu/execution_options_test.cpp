// ExecutionOptions on the CPU path: any worker count gives the oracle's result (including more
// workers than there is work), and reruns are bitwise identical.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "cpu/attention_problem.h"
#include "cpu/oracle_dense_mask.h"
#include "cpu/test_support.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {
namespace {

// fp64 accumulation into fp32 outputs: a few fp32 roundings, including the fp32 LSE that
// backward reads (|lse| < 8 here).
constexpr double kTolerance = 1e-6;

ProblemShape threaded_shape() {
  ProblemShape shape;
  shape.batch = {{70, {65, 3}}, {9, {130}}, {1, {1}}};  // several 64-token blocks per segment
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 16;
  return shape;
}

class CpuThreads : public ::testing::TestWithParam<int> {};

TEST_P(CpuThreads, ResultsMatchTheOracle) {
  std::mt19937_64 rng = rng_for_current_test();
  AttentionProblem problem(threaded_shape(), rng);
  dualkv::ForwardParams forward = problem.forward_params(dualkv::Accumulation::kFloat64);
  forward.options.cpu_threads = GetParam();
  dualkv::forward(problem.layout(), forward);
  dualkv::BackwardParams backward = problem.backward_params(dualkv::Accumulation::kFloat64);
  backward.options.cpu_threads = GetParam();
  dualkv::backward(problem.layout(), backward);

  const BatchSpec& batch = threaded_shape().batch;
  const DenseTensor q = to_dense(problem.q), k = to_dense(problem.k), v = to_dense(problem.v);
  const oracle::ForwardResult expected = oracle::dense_mask_forward(batch, q, k, v, problem.softmax_scale);
  EXPECT_TRUE(all_close(to_dense(problem.out), expected.out, kTolerance)) << "O";
  EXPECT_TRUE(all_close(problem.lse.to_dense(), expected.lse, kTolerance)) << "LSE";
  const oracle::Gradients grads =
      oracle::dense_mask_backward(batch, q, k, v, to_dense(problem.dout), problem.softmax_scale);
  EXPECT_TRUE(all_close(to_dense(problem.dq), grads.dq, kTolerance)) << "dQ";
  EXPECT_TRUE(all_close(to_dense(problem.dk), grads.dk, kTolerance)) << "dK";
  EXPECT_TRUE(all_close(to_dense(problem.dv), grads.dv, kTolerance)) << "dV";
}

// 0 = all cores; 64 is far more workers than this problem has tiles.
INSTANTIATE_TEST_SUITE_P(Counts, CpuThreads, ::testing::Values(0, 1, 3, 64));

TEST(Determinism, CpuForwardAndBackwardAreBitwiseReproducible) {
  std::mt19937_64 rng = rng_for_current_test();
  AttentionProblem problem(threaded_shape(), rng);
  auto run = [&] {
    problem.poison_outputs();
    dualkv::forward(problem.layout(), problem.forward_params(dualkv::Accumulation::kFloat32));
    dualkv::backward(problem.layout(), problem.backward_params(dualkv::Accumulation::kFloat32));
    std::vector<std::vector<unsigned char>> bytes;
    for (const StridedTensor* output : {&problem.out, &problem.dq, &problem.dk, &problem.dv}) {
      bytes.push_back(output->storage->bytes());
    }
    const DenseTensor lse = problem.lse.to_dense();
    EXPECT_EQ(problem.lse.count_padding_written(), 0);
    return std::make_pair(bytes, lse.values);
  };
  const auto first = run();
  const auto second = run();
  EXPECT_TRUE(first.first == second.first);
  EXPECT_TRUE(first.second == second.second);
}

}  // namespace
}  // namespace dualkv_test
