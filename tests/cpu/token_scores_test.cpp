// token_scores_forward and token_scores_backward on the CPU: results against the long double
// oracle of token_scores_oracle.h for every storage type, special values, thread counts, and
// every argument rule.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/expect_error.h"
#include "cpu/test_support.h"
#include "cpu/token_scores_oracle.h"
#include "dualkv/dualkv.h"

namespace dualkv_test::token_scores {
namespace {

using dualkv::TokenScoresBackwardParams;
using dualkv::TokenScoresForwardParams;

// The CPU accumulates in double and stores fp32 lse and entropy: the oracle's values to a few fp32
// ulps. Gradients: their storage rounding (2 ulps, the library rounds twice: to fp32, then to
// 16 bits) plus what fp32 lse and entropy leave after the terms cancel.
constexpr double kStatisticsRel = 1e-5;
constexpr double kStatisticsAbs = 1e-6;
constexpr double kGradientUlps = 2;
constexpr double kGradientMagnitudeRel = 1e-5;

::testing::AssertionResult matches_oracle(const Problem& p, const HostArrays& out, const std::vector<int64_t>& rows) {
  const ::testing::AssertionResult statistics = statistics_match_oracle(p, out, rows, kStatisticsRel, kStatisticsAbs);
  if (!statistics) return statistics;
  const ::testing::AssertionResult gradient =
      gradient_matches_oracle(p, out, rows, kGradientUlps, kGradientMagnitudeRel);
  if (!gradient) return gradient;
  return gradient_padding_untouched(p, out);
}

constexpr DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

std::string dtype_label(DType dtype) { return dualkv::dtype_name(dtype); }

// ---- Random problems over storage types, vocabulary sizes and temperatures --------------------

using SweepParam = std::tuple<DType, int64_t, float>;

class TokenScoresCpuSweep : public ::testing::TestWithParam<SweepParam> {};

std::string sweep_name(const ::testing::TestParamInfo<SweepParam>& info) {
  const auto& [dtype, vocab, inverse_temperature] = info.param;
  return dtype_label(dtype) + "_vocab" + std::to_string(vocab) + (inverse_temperature == 1.0f ? "_t1" : "_t0p7");
}

// Nine rows (every use count of the pattern at least twice), with padded logits rows and grad rows
// padded differently, so that a stride mixed up between the two shows.
TEST_P(TokenScoresCpuSweep, ForwardAndBackwardMatchOracle) {
  const auto& [dtype, vocab, inverse_temperature] = GetParam();
  std::mt19937_64 rng = rng_for_current_test();
  const Problem p = random_problem(dtype, 9, vocab, vocab + 3, vocab + 5, inverse_temperature, rng);
  const HostArrays out = run_cpu(p);
  EXPECT_TRUE(matches_oracle(p, out, all_rows(p)));
}

INSTANTIATE_TEST_SUITE_P(TokenScores, TokenScoresCpuSweep,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::Values<int64_t>(1, 17, 127, 129, 1023, 5003),
                                            ::testing::Values(1.0f, 0.7f)),
                         sweep_name);

// ---- Special values, each storage type --------------------------------------------------------

class TokenScoresCpuSpecial : public ::testing::TestWithParam<DType> {};

// Dense rows (row_stride = vocab) of a vocabulary that is not a multiple of any vector width.
Problem special_problem(DType dtype) {
  std::mt19937_64 rng = rng_for_current_test();
  return random_problem(dtype, 8, 131, 131, 131, 0.7f, rng);
}

// Masked entries have probability 0: no dense gradient, no entropy term.
TEST_P(TokenScoresCpuSpecial, MaskedLogitsHaveZeroProbability) {
  Problem p = special_problem(GetParam());
  mask_some_logits(p);
  const HostArrays out = run_cpu(p);
  EXPECT_TRUE(matches_oracle(p, out, all_rows(p)));
}

// A row with every entry masked has no distribution: lse -inf, entropy NaN and a NaN gradient
// (p = exp(-inf - -inf)), as the oracle has them; the other rows are unaffected.
TEST_P(TokenScoresCpuSpecial, FullyMaskedRowHasInfiniteLseAndNaNEntropy) {
  Problem p = special_problem(GetParam());
  const int64_t masked = 2;
  mask_row(p, masked);
  const HostArrays out = run_cpu(p);
  EXPECT_EQ(out.lse[masked], -INFINITY);
  EXPECT_TRUE(std::isnan(out.entropy[masked]));
  EXPECT_TRUE(matches_oracle(p, out, all_rows(p)));
}

// NaN in a row makes that row's lse, entropy and gradient NaN and leaves every other row exact.
TEST_P(TokenScoresCpuSpecial, NaNLogitAffectsOnlyItsRow) {
  Problem p = special_problem(GetParam());
  const int64_t poisoned = 3;
  p.set_logit(poisoned, 77, NAN);
  const HostArrays out = run_cpu(p);
  EXPECT_TRUE(std::isnan(out.lse[poisoned]));
  EXPECT_TRUE(std::isnan(out.entropy[poisoned]));
  EXPECT_TRUE(matches_oracle(p, out, all_rows(p)));
}

// Two uses of one token in a row add their one-hot terms (and both count in the dense part).
TEST_P(TokenScoresCpuSpecial, RepeatedTargetAddsBothUses) {
  Problem p = special_problem(GetParam());
  const int64_t row = 3;  // two uses
  ASSERT_EQ(p.offsets[row + 1] - p.offsets[row], 2);
  p.targets[p.offsets[row] + 1] = p.targets[p.offsets[row]];
  const HostArrays out = run_cpu(p);
  EXPECT_TRUE(matches_oracle(p, out, all_rows(p)));
}

// A row without uses contributes nothing to the loss: its gradient is 0 everywhere.
TEST_P(TokenScoresCpuSpecial, RowWithoutUsesHasZeroGradient) {
  const Problem p = special_problem(GetParam());
  const int64_t row = 1;
  ASSERT_EQ(p.offsets[row + 1], p.offsets[row]);
  const HostArrays out = run_cpu(p);
  for (int64_t j = 0; j < p.vocab; ++j) EXPECT_EQ(decode_at(p.dtype, out.grad, row * p.grad_row_stride + j), 0.0f);
  EXPECT_TRUE(matches_oracle(p, out, all_rows(p)));
}

INSTANTIATE_TEST_SUITE_P(TokenScores, TokenScoresCpuSpecial, ::testing::ValuesIn(kDtypes),
                         [](const ::testing::TestParamInfo<DType>& info) { return dtype_label(info.param); });

// ---- Threads ----------------------------------------------------------------------------------

// Rows are independent, so the thread count cannot change a single bit.
TEST(TokenScoresCpu, ThreadCountDoesNotChangeResults) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_label(dtype));
    std::mt19937_64 rng = rng_for_current_test();
    const Problem p = random_problem(dtype, 37, 1023, 1030, 1023, 0.7f, rng);
    const HostArrays one = run_cpu(p, 1);
    const HostArrays four = run_cpu(p, 4);
    EXPECT_TRUE(same_bits(one.lse, four.lse));
    EXPECT_TRUE(same_bits(one.entropy, four.entropy));
    EXPECT_TRUE(same_bits(one.grad, four.grad));
  }
}

// ---- Argument rules ---------------------------------------------------------------------------

// A valid fp32 call (3 dense rows of 5) whose arrays outlive every BadCall.
struct ValidCall {
  ValidCall() : problem(make_problem()), arrays(problem), original(problem) {}

  static Problem make_problem() {
    std::mt19937_64 rng(20261126);
    return random_problem(DType::kFloat32, 3, 5, 5, 5, 1.0f, rng);
  }

  TokenScoresForwardParams forward() { return forward_params(problem, arrays.pointers()); }
  TokenScoresBackwardParams backward() { return backward_params(problem, arrays.pointers()); }

  // Every array as it was made: rejected calls write nothing.
  ::testing::AssertionResult untouched() const {
    if (!same_bits(arrays.logits, original.logits) || !same_bits(arrays.lse, original.lse) ||
        !same_bits(arrays.entropy, original.entropy) || !same_bits(arrays.offsets, original.offsets) ||
        !same_bits(arrays.targets, original.targets) || !same_bits(arrays.grad_logprob, original.grad_logprob) ||
        !same_bits(arrays.grad_entropy, original.grad_entropy) || !same_bits(arrays.grad, original.grad)) {
      return ::testing::AssertionFailure() << "a rejected call changed an array";
    }
    return ::testing::AssertionSuccess();
  }

  Problem problem;
  HostArrays arrays;
  const HostArrays original;
};

// The uses of ValidCall: rows 0, 1, 2 have 1, 0 and 3 uses (kUsesPattern).
constexpr int64_t kValidUses = 4;

std::shared_ptr<ValidCall> valid_call() {
  static const auto call = std::make_shared<ValidCall>();
  return call;
}

BadCall bad_forward(const std::string& name, std::function<void(TokenScoresForwardParams&)> mutate,
                    const std::string& argument, const std::string& phrase) {
  const std::shared_ptr<ValidCall> valid = valid_call();
  return {"Forward_" + name,
          [valid, mutate] {
            TokenScoresForwardParams params = valid->forward();
            mutate(params);
            dualkv::token_scores_forward(params);
          },
          argument, phrase};
}

BadCall bad_backward(const std::string& name, std::function<void(TokenScoresBackwardParams&)> mutate,
                     const std::string& argument, const std::string& phrase) {
  const std::shared_ptr<ValidCall> valid = valid_call();
  return {"Backward_" + name,
          [valid, mutate] {
            TokenScoresBackwardParams params = valid->backward();
            mutate(params);
            dualkv::token_scores_backward(params);
          },
          argument, phrase};
}

// Points uses.offsets or uses.targets at other contents (kept alive by the returned function).
std::function<void(TokenScoresBackwardParams&)> with_offsets(std::vector<int64_t> offsets) {
  const auto contents = std::make_shared<std::vector<int64_t>>(std::move(offsets));
  return [contents](TokenScoresBackwardParams& p) { p.uses.offsets.data = contents->data(); };
}

std::function<void(TokenScoresBackwardParams&)> with_targets(std::vector<int64_t> targets) {
  const auto contents = std::make_shared<std::vector<int64_t>>(std::move(targets));
  return [contents](TokenScoresBackwardParams& p) { p.uses.targets.data = contents->data(); };
}

// In a build without CUDA a CUDA array cannot be used at all; with CUDA it must match the logits.
std::string device_mismatch_phrase() { return dualkv::cuda_compiled() ? "match" : "DUALKV_ENABLE_CUDA"; }

constexpr dualkv::Device kCuda{dualkv::DeviceKind::kCuda, 0};

std::vector<BadCall> bad_calls() {
  std::vector<BadCall> calls = {
      bad_forward(
          "ZeroVocab", [](TokenScoresForwardParams& p) { p.logits.vocab = 0; }, "logits.vocab", ">= 1"),
      bad_forward(
          "NegativeRows", [](TokenScoresForwardParams& p) { p.logits.rows = -1; }, "logits.rows", "[0, 2^31)"),
      bad_forward(
          "RowStrideBelowVocab", [](TokenScoresForwardParams& p) { p.logits.row_stride = p.logits.vocab - 1; },
          "logits.row_stride", ">= vocab"),
      bad_forward(
          "NullLogits", [](TokenScoresForwardParams& p) { p.logits.data = nullptr; }, "logits", "null"),
      bad_forward(
          "LseCountNotRows", [](TokenScoresForwardParams& p) { p.lse.count += 1; }, "lse.count", "logits.rows"),
      bad_forward(
          "EntropyOnAnotherDevice", [](TokenScoresForwardParams& p) { p.entropy.device = kCuda; }, "entropy.device",
          device_mismatch_phrase()),
      bad_forward(
          "NegativeCpuThreads", [](TokenScoresForwardParams& p) { p.options.cpu_threads = -1; }, "options.cpu_threads",
          ">= 0"),
      bad_forward(
          "EntropyIsLse", [](TokenScoresForwardParams& p) { p.entropy.data = p.lse.data; }, "entropy", "overlap lse"),
      bad_forward(
          "LseInsideLogits",
          [](TokenScoresForwardParams& p) { p.lse.data = static_cast<float*>(const_cast<void*>(p.logits.data)) + 4; },
          "lse", "overlap logits"),
      bad_backward(
          "ZeroVocab", [](TokenScoresBackwardParams& p) { p.logits.vocab = 0; }, "logits.vocab", ">= 1"),
      bad_backward(
          "NullGradLogits", [](TokenScoresBackwardParams& p) { p.grad_logits.data = nullptr; }, "grad_logits", "null"),
      bad_backward(
          "GradLogitsDtypeNotLogitsDtype", [](TokenScoresBackwardParams& p) { p.grad_logits.dtype = DType::kBFloat16; },
          "grad_logits.dtype", "match"),
      bad_backward(
          "GradLogitsFewerRows", [](TokenScoresBackwardParams& p) { p.grad_logits.rows -= 1; }, "grad_logits", "shape"),
      bad_backward(
          "GradLogitsSmallerVocab", [](TokenScoresBackwardParams& p) { p.grad_logits.vocab -= 1; }, "grad_logits",
          "shape"),
      bad_backward(
          "LseCountNotRows", [](TokenScoresBackwardParams& p) { p.lse.count -= 1; }, "lse.count", "logits.rows"),
      bad_backward(
          "OffsetsCountNotRowsPlusOne", [](TokenScoresBackwardParams& p) { p.uses.offsets.count -= 1; },
          "uses.offsets.count", "logits.rows + 1"),
      bad_backward(
          "GradLogprobCountNotUses", [](TokenScoresBackwardParams& p) { p.uses.grad_logprob.count -= 1; },
          "uses.grad_logprob.count", "uses.targets.count"),
      bad_backward(
          "GradEntropyCountNotUses", [](TokenScoresBackwardParams& p) { p.uses.grad_entropy.count += 1; },
          "uses.grad_entropy.count", "uses.targets.count"),
      bad_backward(
          "NegativeCpuThreads", [](TokenScoresBackwardParams& p) { p.options.cpu_threads = -1; }, "options.cpu_threads",
          ">= 0"),
      bad_backward(
          "GradLogitsIsLogits",
          [](TokenScoresBackwardParams& p) { p.grad_logits.data = const_cast<void*>(p.logits.data); }, "grad_logits",
          "overlap logits"),
      // Contents of the uses, which the CPU path checks before writing anything.
      bad_backward("FirstOffsetNotZero", with_offsets({1, 1, 1, kValidUses}), "uses.offsets[0]", "must be 0"),
      bad_backward("DecreasingOffsets", with_offsets({0, 2, 1, kValidUses}), "uses.offsets[2]", ">= uses.offsets[1]"),
      bad_backward("LastOffsetNotUses", with_offsets({0, 1, 1, kValidUses - 1}), "uses.offsets[3]", "number of uses"),
      bad_backward("TargetEqualsVocab", with_targets({0, 1, 5, 2}), "uses.targets[2]", "[0, vocab)"),
      bad_backward("NegativeTarget", with_targets({0, 1, 2, -1}), "uses.targets[3]", "[0, vocab)"),
  };
  const std::pair<std::string, float> bad_temperatures[] = {{"Zero", 0.0f},
                                                            {"Negative", -0.5f},
                                                            {"Infinite", std::numeric_limits<float>::infinity()},
                                                            {"NaN", std::numeric_limits<float>::quiet_NaN()}};
  for (const auto& [label, value] : bad_temperatures) {
    const float bad = value;
    calls.push_back(bad_forward(
        "InverseTemperature" + label, [bad](TokenScoresForwardParams& p) { p.inverse_temperature = bad; },
        "inverse_temperature", "finite and > 0"));
    calls.push_back(bad_backward(
        "InverseTemperature" + label, [bad](TokenScoresBackwardParams& p) { p.inverse_temperature = bad; },
        "inverse_temperature", "finite and > 0"));
  }
  return calls;
}

// The base call of every BadCall is valid, so each rejection is the mutation's doing.
TEST(TokenScoresArguments, ValidBaseCallIsAccepted) {
  ValidCall valid;
  ASSERT_EQ(valid.problem.uses(), kValidUses);
  EXPECT_NO_THROW(dualkv::token_scores_forward(valid.forward()));
  EXPECT_NO_THROW(dualkv::token_scores_backward(valid.backward()));
}

class TokenScoresValidation : public ::testing::TestWithParam<BadCall> {};

TEST_P(TokenScoresValidation, RejectsNamingTheArgument) {
  EXPECT_TRUE(rejected_as_expected(GetParam()));
  EXPECT_TRUE(valid_call()->untouched());
}

INSTANTIATE_TEST_SUITE_P(TokenScores, TokenScoresValidation, ::testing::ValuesIn(bad_calls()), bad_call_name);

}  // namespace
}  // namespace dualkv_test::token_scores
