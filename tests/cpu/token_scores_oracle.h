// Token scores (include/dualkv/token_scores.h) for the CPU and GPU suites: random problems, their
// host arrays, an independent long double oracle written from the definitions (two passes per
// row, nothing shared with the library), and comparisons in which NaN only matches NaN.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dualkv/dualkv.h"
#include "host/float16.h"

namespace dualkv_test::token_scores {

using dualkv::DType;

// ---- Storage types ----------------------------------------------------------------------------

inline size_t element_bytes(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

inline uint16_t to_bits16(DType dtype, float value) {
  return dtype == DType::kFloat16 ? dualkv::detail::float_to_fp16(value) : dualkv::detail::float_to_bf16(value);
}

inline float from_bits16(DType dtype, uint16_t bits) {
  return dtype == DType::kFloat16 ? dualkv::detail::fp16_to_float(bits) : dualkv::detail::bf16_to_float(bits);
}

// The value a float becomes once stored in `dtype` (round to nearest even).
inline float stored(DType dtype, float value) {
  return dtype == DType::kFloat32 ? value : from_bits16(dtype, to_bits16(dtype, value));
}

inline std::vector<unsigned char> encode(DType dtype, const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * element_bytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kFloat32) {
      std::memcpy(&bytes[4 * i], &values[i], 4);
    } else {
      const uint16_t bits = to_bits16(dtype, values[i]);
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
  }
  return bytes;
}

inline float decode_at(DType dtype, const std::vector<unsigned char>& bytes, int64_t index) {
  if (dtype == DType::kFloat32) {
    float value;
    std::memcpy(&value, &bytes[4 * index], 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, &bytes[2 * index], 2);
  return from_bits16(dtype, bits);
}

// The distance from |value| (rounded to dtype) to the next larger value of dtype.
inline double ulp(DType dtype, double value) {
  const float magnitude = stored(dtype, std::fabs(static_cast<float>(value)));
  if (dtype == DType::kFloat32) return std::nextafter(magnitude, INFINITY) - magnitude;
  const uint16_t bits = to_bits16(dtype, magnitude);
  return from_bits16(dtype, static_cast<uint16_t>(bits + 1)) - from_bits16(dtype, bits);
}

// Outputs are filled with this before each call: a finite value no result comes near, so that an
// element left unwritten fails every comparison, a NaN expectation included.
constexpr float kPoison = 12345.0f;

// ---- Problems ---------------------------------------------------------------------------------

// Logits in (rows, vocab) with padded rows, and each row's token uses in CSR form.
struct Problem {
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t row_stride = 0;       // of the logits
  int64_t grad_row_stride = 0;  // of grad_logits
  float inverse_temperature = 1.0f;
  // (rows - 1) * row_stride + vocab values, each exactly representable in dtype; padding is NaN
  // so that a read past a row's vocab shows in its results.
  std::vector<float> logits;
  std::vector<int64_t> offsets;
  std::vector<int64_t> targets;
  std::vector<float> grad_logprob;
  std::vector<float> grad_entropy;

  float logit(int64_t r, int64_t j) const { return logits[r * row_stride + j]; }
  void set_logit(int64_t r, int64_t j, float value) { logits[r * row_stride + j] = value; }
  int64_t uses() const { return static_cast<int64_t>(targets.size()); }
  int64_t grad_elements() const { return rows == 0 ? 0 : (rows - 1) * grad_row_stride + vocab; }
};

// Rows cycle through 1, 0, 3 and 2 uses, so any four consecutive rows have each count; a row
// with 3 uses scores its first target again (a shared prompt row scoring several responses).
constexpr int kUsesPattern[] = {1, 0, 3, 2};

inline int64_t uses_of_row(int64_t r) { return kUsesPattern[r % 4]; }

// Logits ~ N(0, 3) rounded to dtype, targets uniform, incoming gradients ~ N(0, 1).
inline Problem random_problem(DType dtype, int64_t rows, int64_t vocab, int64_t row_stride, int64_t grad_row_stride,
                              float inverse_temperature, std::mt19937_64& rng) {
  Problem p;
  p.dtype = dtype;
  p.rows = rows;
  p.vocab = vocab;
  p.row_stride = row_stride;
  p.grad_row_stride = grad_row_stride;
  p.inverse_temperature = inverse_temperature;
  p.logits.assign(rows == 0 ? 0 : (rows - 1) * row_stride + vocab, NAN);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::normal_distribution<float> gradient(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  p.offsets.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < vocab; ++j) p.set_logit(r, j, stored(dtype, logit(rng)));
    const int64_t first = p.uses();
    for (int64_t k = 0; k < uses_of_row(r); ++k) {
      p.targets.push_back(k == 2 ? p.targets[first] : token(rng));
      p.grad_logprob.push_back(gradient(rng));
      p.grad_entropy.push_back(gradient(rng));
    }
    p.offsets.push_back(p.uses());
  }
  return p;
}

// Masked (-inf) logits in three rows: row 0 (one use) every fifth entry, its target among them, so
// that only its one-hot term is left; row 2 (three uses) every other entry; row 4 (one use) its
// first 64 entries, whole 16-byte vectors of the GPU path.
inline void mask_some_logits(Problem& p) {
  p.targets[p.offsets[0]] = 5 % p.vocab;
  for (int64_t j = 0; j < p.vocab; j += 5) p.set_logit(0, j, -INFINITY);
  for (int64_t j = 1; j < p.vocab; j += 2) p.set_logit(2, j, -INFINITY);
  for (int64_t j = 0; j < std::min<int64_t>(64, p.vocab); ++j) p.set_logit(4, j, -INFINITY);
}

inline void mask_row(Problem& p, int64_t r) {
  for (int64_t j = 0; j < p.vocab; ++j) p.set_logit(r, j, -INFINITY);
}

// ---- Host arrays and call parameters ----------------------------------------------------------

// Where a problem's arrays live, for either device.
struct Pointers {
  dualkv::Device device;
  const void* logits;
  float* lse;
  float* entropy;
  const int64_t* offsets;
  const int64_t* targets;
  const float* grad_logprob;
  const float* grad_entropy;
  void* grad;
};

inline dualkv::TokenScoresForwardParams forward_params(const Problem& p, const Pointers& at) {
  dualkv::TokenScoresForwardParams params;
  params.logits = {at.logits, p.dtype, at.device, p.rows, p.vocab, p.row_stride};
  params.inverse_temperature = p.inverse_temperature;
  params.lse = {at.lse, at.device, p.rows};
  params.entropy = {at.entropy, at.device, p.rows};
  return params;
}

inline dualkv::TokenScoresBackwardParams backward_params(const Problem& p, const Pointers& at) {
  dualkv::TokenScoresBackwardParams params;
  params.logits = {at.logits, p.dtype, at.device, p.rows, p.vocab, p.row_stride};
  params.inverse_temperature = p.inverse_temperature;
  params.lse = {at.lse, at.device, p.rows};
  params.entropy = {at.entropy, at.device, p.rows};
  params.uses.offsets = {at.offsets, at.device, p.rows + 1};
  params.uses.targets = {at.targets, at.device, p.uses()};
  params.uses.grad_logprob = {at.grad_logprob, at.device, p.uses()};
  params.uses.grad_entropy = {at.grad_entropy, at.device, p.uses()};
  params.grad_logits = {at.grad, p.dtype, at.device, p.rows, p.vocab, p.grad_row_stride};
  return params;
}

// Every array of a call in host memory: inputs encoded in the problem's dtype, outputs poisoned.
struct HostArrays {
  explicit HostArrays(const Problem& p)
      : logits(encode(p.dtype, p.logits)),
        lse(p.rows, kPoison),
        entropy(p.rows, kPoison),
        offsets(p.offsets),
        targets(p.targets),
        grad_logprob(p.grad_logprob),
        grad_entropy(p.grad_entropy),
        grad(encode(p.dtype, std::vector<float>(p.grad_elements(), kPoison))) {}

  Pointers pointers() {
    return {dualkv::Device{dualkv::DeviceKind::kCpu, 0},
            logits.data(),
            lse.data(),
            entropy.data(),
            offsets.data(),
            targets.data(),
            grad_logprob.data(),
            grad_entropy.data(),
            grad.data()};
  }

  std::vector<unsigned char> logits;
  std::vector<float> lse, entropy;
  std::vector<int64_t> offsets, targets;
  std::vector<float> grad_logprob, grad_entropy;
  std::vector<unsigned char> grad;
};

// Equal bit for bit (so that NaN equals the same NaN).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The forward, then the backward with the forward's lse and entropy, on the CPU. Checks that
// neither call changes its inputs (the backward's include the forward's outputs).
inline HostArrays run_cpu(const Problem& p, int cpu_threads = 0) {
  HostArrays arrays(p);
  const HostArrays original(p);
  dualkv::TokenScoresForwardParams forward = forward_params(p, arrays.pointers());
  forward.options.cpu_threads = cpu_threads;
  dualkv::token_scores_forward(forward);
  const std::vector<float> lse = arrays.lse, entropy = arrays.entropy;
  dualkv::TokenScoresBackwardParams backward = backward_params(p, arrays.pointers());
  backward.options.cpu_threads = cpu_threads;
  dualkv::token_scores_backward(backward);
  EXPECT_TRUE(same_bits(arrays.logits, original.logits)) << "logits changed";
  EXPECT_TRUE(same_bits(arrays.offsets, original.offsets)) << "uses.offsets changed";
  EXPECT_TRUE(same_bits(arrays.targets, original.targets)) << "uses.targets changed";
  EXPECT_TRUE(same_bits(arrays.grad_logprob, original.grad_logprob)) << "uses.grad_logprob changed";
  EXPECT_TRUE(same_bits(arrays.grad_entropy, original.grad_entropy)) << "uses.grad_entropy changed";
  EXPECT_TRUE(same_bits(arrays.lse, lse)) << "the backward changed lse";
  EXPECT_TRUE(same_bits(arrays.entropy, entropy)) << "the backward changed entropy";
  return arrays;
}

// ---- Oracle -----------------------------------------------------------------------------------

struct OracleStatistics {
  long double lse;
  long double entropy;
};

// With z = logit * inverse_temperature: lse = m + log sum exp(z - m) for m = max z, and
// entropy = -sum p log p with log p = z - lse; masked entries (p = 0) add 0, their limit.
inline OracleStatistics oracle_statistics(const Problem& p, int64_t r) {
  const long double it = p.inverse_temperature;
  long double max = -INFINITY;
  for (int64_t j = 0; j < p.vocab; ++j) {
    const long double z = p.logit(r, j) * it;
    if (std::isnan(z)) return {NAN, NAN};
    max = std::fmax(max, z);
  }
  if (max == -INFINITY) return {-INFINITY, NAN};  // every entry masked: no distribution
  long double sum = 0;
  for (int64_t j = 0; j < p.vocab; ++j) sum += std::exp(p.logit(r, j) * it - max);
  const long double lse = max + std::log(sum);
  long double entropy = 0;
  for (int64_t j = 0; j < p.vocab; ++j) {
    const long double log_p = p.logit(r, j) * it - lse;
    if (log_p != -INFINITY) entropy -= std::exp(log_p) * log_p;
  }
  return {lse, entropy};
}

struct OracleGradient {
  double value;
  // The sum of the absolute values of the terms of `value`, with log p widened by 1: the scale
  // of the error that fp32 lse, entropy and log p (off by ~|lse| * 1e-7) leave after the terms
  // cancel.
  double magnitude;
};

// d/d logit[r, j] of sum_u grad_logprob[u] log p[target_u] + grad_entropy[u] entropy over the
// row's uses: inverse_temperature * sum_u grad_logprob[u] ([j = target_u] - p_j)
// - grad_entropy[u] p_j (log p_j + H), where p log p is 0 for p = 0.
inline std::vector<OracleGradient> oracle_gradient_row(const Problem& p, int64_t r) {
  const OracleStatistics s = oracle_statistics(p, r);
  const long double it = p.inverse_temperature;
  std::vector<OracleGradient> row(p.vocab);
  for (int64_t j = 0; j < p.vocab; ++j) {
    const long double log_p = p.logit(r, j) * it - s.lse;
    const long double prob = std::exp(log_p);
    const long double p_log_p_plus_h = prob == 0 ? 0 : prob * (log_p + s.entropy);
    const long double p_size = prob == 0 ? 0 : prob * (std::fabs(log_p) + std::fabs(s.entropy) + 1);
    long double value = 0, magnitude = 0;
    for (int64_t u = p.offsets[r]; u < p.offsets[r + 1]; ++u) {
      const long double one_hot = p.targets[u] == j ? 1 : 0;
      value += p.grad_logprob[u] * (one_hot - prob) - p.grad_entropy[u] * p_log_p_plus_h;
      magnitude += std::fabs(p.grad_logprob[u]) * (one_hot + prob) + std::fabs(p.grad_entropy[u]) * p_size;
    }
    row[j] = {static_cast<double>(value * it), static_cast<double>(magnitude * it)};
  }
  return row;
}

// ---- Comparisons ------------------------------------------------------------------------------

// Collects the elements that miss their expectation: NaN must meet NaN, an infinity the same
// infinity, a finite value a finite one within the tolerance. Reports the count and the first few.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}

  void check(const std::string& where, double actual, double expected, double tolerance) {
    ++checked_;
    bool ok;
    if (std::isnan(expected)) {
      ok = std::isnan(actual);
    } else if (std::isinf(expected)) {
      ok = actual == expected;
    } else {
      ok = std::isfinite(actual) && std::fabs(actual - expected) <= tolerance;
    }
    if (ok) return;
    if (++count_ <= kShown) {
      examples_ << "\n  " << where << ": got " << actual << ", expected " << expected << " +- " << tolerance;
    }
  }

  void expect_bits(const std::string& where, bool equal) {
    ++checked_;
    if (!equal && ++count_ <= kShown) examples_ << "\n  " << where << ": changed";
  }

  ::testing::AssertionResult result() const {
    if (count_ == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what_ << ": " << count_ << " of " << checked_ << " elements wrong"
                                         << examples_.str();
  }

 private:
  static constexpr int kShown = 5;
  std::string what_;
  int64_t checked_ = 0;
  int64_t count_ = 0;
  std::ostringstream examples_;
};

inline std::string at(int64_t r) { return "row " + std::to_string(r); }
inline std::string at(int64_t r, int64_t j) { return "[" + std::to_string(r) + ", " + std::to_string(j) + "]"; }

// lse and entropy against the oracle, within rel * |expected| + abs, for the rows in `rows`.
inline ::testing::AssertionResult statistics_match_oracle(const Problem& p, const HostArrays& out,
                                                          const std::vector<int64_t>& rows, double rel, double abs) {
  Mismatches lse("lse"), entropy("entropy");
  for (int64_t r : rows) {
    const OracleStatistics s = oracle_statistics(p, r);
    lse.check(at(r), out.lse[r], static_cast<double>(s.lse), rel * std::fabs(static_cast<double>(s.lse)) + abs);
    entropy.check(at(r), out.entropy[r], static_cast<double>(s.entropy),
                  rel * std::fabs(static_cast<double>(s.entropy)) + abs);
  }
  if (!lse.result()) return lse.result();
  return entropy.result();
}

// grad_logits against the oracle rounded to the problem's dtype, within `ulps` of that dtype plus
// magnitude_rel * the oracle's magnitude, for the rows in `rows`.
inline ::testing::AssertionResult gradient_matches_oracle(const Problem& p, const HostArrays& out,
                                                          const std::vector<int64_t>& rows, double ulps,
                                                          double magnitude_rel) {
  Mismatches grad("grad_logits");
  for (int64_t r : rows) {
    const std::vector<OracleGradient> expected = oracle_gradient_row(p, r);
    for (int64_t j = 0; j < p.vocab; ++j) {
      const double rounded = stored(p.dtype, static_cast<float>(expected[j].value));
      grad.check(at(r, j), decode_at(p.dtype, out.grad, r * p.grad_row_stride + j), rounded,
                 ulps * ulp(p.dtype, rounded) + magnitude_rel * expected[j].magnitude);
    }
  }
  return grad.result();
}

// The padding between grad_logits rows still holds the poison: it belongs to the caller.
inline ::testing::AssertionResult gradient_padding_untouched(const Problem& p, const HostArrays& out) {
  Mismatches padding("grad_logits padding");
  const std::vector<unsigned char> poison = encode(p.dtype, {kPoison});
  const size_t size = element_bytes(p.dtype);
  for (int64_t r = 0; r + 1 < p.rows; ++r) {
    for (int64_t j = p.vocab; j < p.grad_row_stride; ++j) {
      const int64_t index = r * p.grad_row_stride + j;
      padding.expect_bits(at(r, j), std::memcmp(&out.grad[index * size], poison.data(), size) == 0);
    }
  }
  return padding.result();
}

inline std::vector<int64_t> all_rows(const Problem& p) {
  std::vector<int64_t> rows(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) rows[r] = r;
  return rows;
}

inline std::vector<int64_t> rows_except(const Problem& p, int64_t excluded) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < p.rows; ++r) {
    if (r != excluded) rows.push_back(r);
  }
  return rows;
}

}  // namespace dualkv_test::token_scores
