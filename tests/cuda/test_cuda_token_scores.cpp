// token_scores_forward and token_scores_backward on the GPU, on a stream of their own: against
// the CPU path and the long double oracle (tests/cpu/token_scores_oracle.h), over storage types,
// vocabulary sizes up to Qwen's, 16-byte aligned rows (vector loads) and misaligned ones (scalar
// loads), special values, and the NaN rows that stand for bad uses on the device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/test_support.h"
#include "cpu/token_scores_oracle.h"
#include "device_memory.h"

namespace dualkv_test::token_scores {
namespace {

// lse and entropy: fp32 sums of ex2.approx terms, over up to 151936 entries.
constexpr double kStatisticsRel = 1e-5;
constexpr double kStatisticsAbs = 1e-5;
// Gradients: the dtype's rounding of nearly equal values (1 ulp against the CPU, 2 against the
// oracle, which the CPU path also rounds twice), plus fp32 log p (z, lse, ex2.approx, each off by
// ~1e-7 relative) after the terms cancel.
constexpr double kUlpsFromCpu = 1;
constexpr double kUlpsFromOracle = 2;
constexpr double kGradientMagnitudeRel = 1e-4;

template <typename T>
size_t bytes_of(const std::vector<T>& values) {
  return values.size() * sizeof(T);
}

template <typename T>
void upload(DeviceBytes& device, const std::vector<T>& host) {
  if (device.bytes() > 0) device.upload(host.data());
}

template <typename T>
void download(const DeviceBytes& device, std::vector<T>& host) {
  if (device.bytes() > 0) device.download(host.data());
}

// The device copy of a HostArrays, outputs poisoned as on the host.
class DeviceArrays {
 public:
  explicit DeviceArrays(const HostArrays& host)
      : logits_(bytes_of(host.logits)),
        lse_(bytes_of(host.lse)),
        entropy_(bytes_of(host.entropy)),
        offsets_(bytes_of(host.offsets)),
        targets_(bytes_of(host.targets)),
        grad_logprob_(bytes_of(host.grad_logprob)),
        grad_entropy_(bytes_of(host.grad_entropy)),
        grad_(bytes_of(host.grad)) {
    upload(logits_, host.logits);
    upload(lse_, host.lse);
    upload(entropy_, host.entropy);
    upload(offsets_, host.offsets);
    upload(targets_, host.targets);
    upload(grad_logprob_, host.grad_logprob);
    upload(grad_entropy_, host.grad_entropy);
    upload(grad_, host.grad);
  }

  Pointers pointers() const {
    return {dualkv::Device{dualkv::DeviceKind::kCuda, 0},
            logits_.data(),
            static_cast<float*>(lse_.data()),
            static_cast<float*>(entropy_.data()),
            static_cast<const int64_t*>(offsets_.data()),
            static_cast<const int64_t*>(targets_.data()),
            static_cast<const float*>(grad_logprob_.data()),
            static_cast<const float*>(grad_entropy_.data()),
            grad_.data()};
  }

  // Every array, into `host` (shaped like the one this was made from).
  void download_into(HostArrays& host) const {
    download(logits_, host.logits);
    download(lse_, host.lse);
    download(entropy_, host.entropy);
    download(offsets_, host.offsets);
    download(targets_, host.targets);
    download(grad_logprob_, host.grad_logprob);
    download(grad_entropy_, host.grad_entropy);
    download(grad_, host.grad);
  }

 private:
  DeviceBytes logits_, lse_, entropy_, offsets_, targets_, grad_logprob_, grad_entropy_, grad_;
};

// The forward, then the backward with the forward's lse and entropy, on the GPU on a non-blocking
// stream. Checks that neither call changes its inputs (the backward's include the forward's
// outputs).
HostArrays run_cuda(const Problem& p) {
  const HostArrays original(p);
  DeviceArrays device(original);
  const Stream stream;
  dualkv::TokenScoresForwardParams forward = forward_params(p, device.pointers());
  forward.options.stream = stream.get();
  dualkv::token_scores_forward(forward);
  check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize after the forward");
  HostArrays after_forward(p);
  device.download_into(after_forward);
  dualkv::TokenScoresBackwardParams backward = backward_params(p, device.pointers());
  backward.options.stream = stream.get();
  dualkv::token_scores_backward(backward);
  check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize after the backward");
  HostArrays out(p);
  device.download_into(out);
  EXPECT_TRUE(same_bits(out.logits, original.logits)) << "logits changed";
  EXPECT_TRUE(same_bits(out.offsets, original.offsets)) << "uses.offsets changed";
  EXPECT_TRUE(same_bits(out.targets, original.targets)) << "uses.targets changed";
  EXPECT_TRUE(same_bits(out.grad_logprob, original.grad_logprob)) << "uses.grad_logprob changed";
  EXPECT_TRUE(same_bits(out.grad_entropy, original.grad_entropy)) << "uses.grad_entropy changed";
  EXPECT_TRUE(same_bits(out.lse, after_forward.lse)) << "the backward changed lse";
  EXPECT_TRUE(same_bits(out.entropy, after_forward.entropy)) << "the backward changed entropy";
  return out;
}

// The GPU's results against the CPU path's (NaN and infinities included) on `rows`.
::testing::AssertionResult agrees_with_cpu(const Problem& p, const HostArrays& gpu, const HostArrays& cpu,
                                           const std::vector<int64_t>& rows) {
  Mismatches lse("lse"), entropy("entropy"), grad("grad_logits");
  for (int64_t r : rows) {
    lse.check(at(r), gpu.lse[r], cpu.lse[r], kStatisticsRel * std::fabs(cpu.lse[r]) + kStatisticsAbs);
    entropy.check(at(r), gpu.entropy[r], cpu.entropy[r], kStatisticsRel * std::fabs(cpu.entropy[r]) + kStatisticsAbs);
    const std::vector<OracleGradient> oracle = oracle_gradient_row(p, r);
    for (int64_t j = 0; j < p.vocab; ++j) {
      const int64_t index = r * p.grad_row_stride + j;
      const double expected = decode_at(p.dtype, cpu.grad, index), actual = decode_at(p.dtype, gpu.grad, index);
      const double larger = std::max(std::fabs(expected), std::fabs(actual));
      grad.check(at(r, j), actual, expected,
                 kUlpsFromCpu * ulp(p.dtype, larger) + kGradientMagnitudeRel * oracle[j].magnitude);
    }
  }
  for (const Mismatches* part : {&lse, &entropy, &grad}) {
    if (!part->result()) return part->result();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult matches_oracle(const Problem& p, const HostArrays& out, const std::vector<int64_t>& rows) {
  const ::testing::AssertionResult statistics = statistics_match_oracle(p, out, rows, kStatisticsRel, kStatisticsAbs);
  if (!statistics) return statistics;
  const ::testing::AssertionResult gradient =
      gradient_matches_oracle(p, out, rows, kUlpsFromOracle, kGradientMagnitudeRel);
  if (!gradient) return gradient;
  return gradient_padding_untouched(p, out);
}

// Both references, on every row.
void expect_right(const Problem& p, const HostArrays& gpu) {
  const HostArrays cpu = run_cpu(p);
  EXPECT_TRUE(agrees_with_cpu(p, gpu, cpu, all_rows(p)));
  EXPECT_TRUE(matches_oracle(p, gpu, all_rows(p)));
}

constexpr DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

// Aligned: row strides a multiple of 8 elements, so every row of logits and grad_logits starts on
// 16 bytes and the kernels take the vector path. Misaligned: odd strides, so most rows do not
// (row 0 still does) and take the scalar path.
enum class Rows { kAligned, kMisaligned };

struct Strides {
  int64_t logits;
  int64_t grad;
};

Strides strides_for(int64_t vocab, Rows rows) {
  if (rows == Rows::kAligned) {
    const int64_t stride = (vocab + 7) / 8 * 8;
    return {stride, stride + 8};
  }
  const int64_t stride = vocab % 2 == 1 ? vocab : vocab + 1;
  return {stride, stride + 2};
}

std::string rows_label(Rows rows) { return rows == Rows::kAligned ? "aligned" : "misaligned"; }

// ---- Random problems over storage types, vocabulary sizes, row alignment and temperatures -----

constexpr int64_t kQwenVocab = 151936;

using SweepParam = std::tuple<DType, int64_t, Rows, float>;

class TokenScoresCudaSweep : public ::testing::TestWithParam<SweepParam> {};

std::string sweep_name(const ::testing::TestParamInfo<SweepParam>& info) {
  const auto& [dtype, vocab, rows, inverse_temperature] = info.param;
  return std::string(dualkv::dtype_name(dtype)) + "_vocab" + std::to_string(vocab) + "_" + rows_label(rows) +
         (inverse_temperature == 1.0f ? "_t1" : "_t0p7");
}

// Nine rows (every use count of the pattern at least twice); four at Qwen's vocabulary.
TEST_P(TokenScoresCudaSweep, MatchesCpuAndOracle) {
  const auto& [dtype, vocab, rows, inverse_temperature] = GetParam();
  std::mt19937_64 rng = rng_for_current_test();
  const Strides strides = strides_for(vocab, rows);
  const Problem p =
      random_problem(dtype, vocab == kQwenVocab ? 4 : 9, vocab, strides.logits, strides.grad, inverse_temperature, rng);
  expect_right(p, run_cuda(p));
}

INSTANTIATE_TEST_SUITE_P(TokenScores, TokenScoresCudaSweep,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::Values<int64_t>(1, 17, 127, 129, 1023, 5003, kQwenVocab),
                                            ::testing::Values(Rows::kAligned, Rows::kMisaligned),
                                            ::testing::Values(1.0f, 0.7f)),
                         sweep_name);

// ---- Special values ---------------------------------------------------------------------------

using SpecialParam = std::tuple<DType, Rows>;

class TokenScoresCudaSpecial : public ::testing::TestWithParam<SpecialParam> {
 protected:
  Problem special_problem() const {
    const auto& [dtype, rows] = GetParam();
    std::mt19937_64 rng = rng_for_current_test();
    const Strides strides = strides_for(1031, rows);
    return random_problem(dtype, 8, 1031, strides.logits, strides.grad, 0.7f, rng);
  }
};

std::string special_name(const ::testing::TestParamInfo<SpecialParam>& info) {
  const auto& [dtype, rows] = info.param;
  return std::string(dualkv::dtype_name(dtype)) + "_" + rows_label(rows);
}

// Masked entries have probability 0, whether a whole vector of them or scattered ones.
TEST_P(TokenScoresCudaSpecial, MaskedLogitsHaveZeroProbability) {
  Problem p = special_problem();
  mask_some_logits(p);
  expect_right(p, run_cuda(p));
}

// A row with every entry masked: lse -inf, entropy and gradient NaN; the other rows unaffected.
TEST_P(TokenScoresCudaSpecial, FullyMaskedRowHasInfiniteLseAndNaNEntropy) {
  Problem p = special_problem();
  const int64_t masked = 2;
  mask_row(p, masked);
  const HostArrays out = run_cuda(p);
  EXPECT_EQ(out.lse[masked], -INFINITY);
  EXPECT_TRUE(std::isnan(out.entropy[masked]));
  expect_right(p, out);
}

// NaN in a row (in a vector of the aligned rows) makes that row NaN and no other.
TEST_P(TokenScoresCudaSpecial, NaNLogitAffectsOnlyItsRow) {
  Problem p = special_problem();
  const int64_t poisoned = 3;
  p.set_logit(poisoned, 77, NAN);
  const HostArrays out = run_cuda(p);
  EXPECT_TRUE(std::isnan(out.lse[poisoned]));
  EXPECT_TRUE(std::isnan(out.entropy[poisoned]));
  expect_right(p, out);
}

// Two uses of one token in a row add their one-hot terms, even when both land in one thread.
TEST_P(TokenScoresCudaSpecial, RepeatedTargetAddsBothUses) {
  Problem p = special_problem();
  const int64_t row = 3;  // two uses
  ASSERT_EQ(p.offsets[row + 1] - p.offsets[row], 2);
  p.targets[p.offsets[row] + 1] = p.targets[p.offsets[row]];
  expect_right(p, run_cuda(p));
}

INSTANTIATE_TEST_SUITE_P(TokenScores, TokenScoresCudaSpecial,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::Values(Rows::kAligned, Rows::kMisaligned)),
                         special_name);

// ---- Bad uses: the device cannot throw, so the row becomes NaN --------------------------------

// One way of breaking TokenUses' rules, and the only row it breaks. The problem has 4 rows with
// 1, 0, 3 and 2 uses: offsets {0, 1, 1, 4, 6}.
struct BadUses {
  std::string name;
  std::function<void(Problem&)> corrupt;
  int64_t bad_row;
};

void PrintTo(const BadUses& bad, std::ostream* os) { *os << bad.name; }

std::vector<BadUses> bad_uses() {
  return {
      {"TargetEqualsVocab", [](Problem& p) { p.targets[p.offsets[2] + 1] = p.vocab; }, 2},
      {"NegativeTarget", [](Problem& p) { p.targets[p.offsets[0]] = -1; }, 0},
      // Row 0 gets uses [0, 2), row 1 [2, 1), row 2 [1, 4).
      {"DecreasingOffsets", [](Problem& p) { p.offsets[1] = 2; }, 1},
      {"FirstOffsetNotZero", [](Problem& p) { p.offsets[0] = 1; }, 0},
      {"LastOffsetNotUses", [](Problem& p) { p.offsets[4] = p.uses() - 1; }, 3},
  };
}

using BadUsesParam = std::tuple<BadUses, DType>;

class TokenScoresCudaBadUses : public ::testing::TestWithParam<BadUsesParam> {};

std::string bad_uses_name(const ::testing::TestParamInfo<BadUsesParam>& info) {
  return std::get<0>(info.param).name + "_" + dualkv::dtype_name(std::get<1>(info.param));
}

TEST_P(TokenScoresCudaBadUses, FillTheirRowWithNaN) {
  const auto& [bad, dtype] = GetParam();
  std::mt19937_64 rng = rng_for_current_test();
  Problem p = random_problem(dtype, 4, 129, 136, 136, 0.7f, rng);
  ASSERT_EQ(p.offsets, (std::vector<int64_t>{0, 1, 1, 4, 6}));
  bad.corrupt(p);
  const HostArrays out = run_cuda(p);
  Mismatches nan_row("grad_logits of the bad row");
  for (int64_t j = 0; j < p.vocab; ++j) {
    nan_row.check(at(bad.bad_row, j), decode_at(p.dtype, out.grad, bad.bad_row * p.grad_row_stride + j), NAN, 0);
  }
  EXPECT_TRUE(nan_row.result());
  EXPECT_TRUE(matches_oracle(p, out, rows_except(p, bad.bad_row)));
}

INSTANTIATE_TEST_SUITE_P(TokenScores, TokenScoresCudaBadUses,
                         ::testing::Combine(::testing::ValuesIn(bad_uses()), ::testing::ValuesIn(kDtypes)),
                         bad_uses_name);

}  // namespace
}  // namespace dualkv_test::token_scores
