// Error metrics between two float arrays. NaN anywhere makes both metrics NaN (never a pass).
#pragma once

#include <vector>

namespace dualkv::tools {

struct ErrorStats {
  double max_abs = 0.0;      // max |a - b|
  double max_ref = 0.0;      // max |b|, for scale
  double relative_l2 = 0.0;  // ||a - b|| / ||b||
};

ErrorStats compare(const std::vector<float>& actual, const std::vector<float>& reference);

}  // namespace dualkv::tools
