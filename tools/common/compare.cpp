#include "common/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dualkv::tools {

ErrorStats compare(const std::vector<float>& actual, const std::vector<float>& reference) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (actual.size() != reference.size()) return {kNaN, kNaN, kNaN};
  ErrorStats stats;
  double diff_sq = 0.0, ref_sq = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], b = reference[i];
    if (std::isnan(a) || std::isnan(b)) return {kNaN, kNaN, kNaN};
    stats.max_abs = std::max(stats.max_abs, std::abs(a - b));
    stats.max_ref = std::max(stats.max_ref, std::abs(b));
    diff_sq += (a - b) * (a - b);
    ref_sq += b * b;
  }
  stats.relative_l2 = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  return stats;
}

}  // namespace dualkv::tools
