// The CPU suite's error budget, relative to |expected| + rms(expected) (see all_close), in machine
// epsilons:
// - storage: outputs are rounded once to their dtype (half an epsilon), with margin; the
//   backward pass reads `out` as rounded by forward, and dS = P (dP - rowsum(dO * O)) subtracts
//   two similar numbers, which amplifies that rounding by a small factor in dQ and dK;
// - accumulation: rounding errors of a sum of n terms grow like sqrt(n) epsilon (random walk),
//   n being the longest sum formed: head_dim products per score, or the visible keys of a row;
// - LSE: backward recomputes P = exp(s - lse) from the fp32 LSE, so every P of a row carries the
//   relative error |lse| * eps(fp32) / 2 whatever the accumulation precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/test_support.h"
#include "dualkv/dualkv.h"

namespace dualkv_test {

constexpr double kStorageRoundings = 1.0;
constexpr double kBackwardStorageRoundings = 8.0;
constexpr double kAccumulationRoundingsPerSqrtTerm = 4.0;
constexpr double kLseRoundings = 2.0;

// The accumulation term for sums of at most `longest_sum` terms.
inline double accumulation_error(int64_t longest_sum, dualkv::Accumulation accumulation) {
  return kAccumulationRoundingsPerSqrtTerm * accumulation_epsilon(accumulation) *
         std::sqrt(static_cast<double>(longest_sum));
}

inline double max_abs(const DenseTensor& tensor) {
  double largest = 0.0;
  for (double value : tensor.values) largest = std::max(largest, std::abs(value));
  return largest;
}

}  // namespace dualkv_test
