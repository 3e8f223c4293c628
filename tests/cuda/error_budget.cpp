#include "error_budget.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace dualkv_test {
namespace {

constexpr double kBaselineFactor = 2.0;
constexpr double kFloorFloat32Ulps = 64.0;
constexpr double kFloat32Epsilon = 1.0 / (1 << 23);

struct MaxError {
  double value = 0.0;
  size_t worst = 0;
};

// NaN or infinity anywhere makes the error infinite, so it can never pass.
MaxError max_error(const oracle::DenseTensor& actual, const oracle::DenseTensor& reference) {
  MaxError error;
  for (size_t e = 0; e < reference.values.size(); ++e) {
    double difference = std::abs(actual.values[e] - reference.values[e]);
    if (!std::isfinite(difference)) difference = std::numeric_limits<double>::infinity();
    if (difference > error.value || e == 0) {
      error.value = difference;
      error.worst = e;
    }
  }
  return error;
}

std::string position(const oracle::DenseTensor& tensor, size_t element) {
  const auto per_token = static_cast<size_t>(tensor.heads * tensor.dim);
  std::ostringstream text;
  text << "token " << element / per_token << ", head " << (element % per_token) / tensor.dim << ", index "
       << element % tensor.dim;
  return text.str();
}

bool same_shape(const oracle::DenseTensor& a, const oracle::DenseTensor& b) {
  return a.tokens == b.tokens && a.heads == b.heads && a.dim == b.dim;
}

}  // namespace

::testing::AssertionResult within_error_budget(const oracle::DenseTensor& kernel, const oracle::DenseTensor& baseline,
                                               const oracle::DenseTensor& reference) {
  if (!same_shape(kernel, reference) || !same_shape(baseline, reference)) {
    return ::testing::AssertionFailure() << "shape mismatch";
  }
  double largest = 0.0;
  for (double value : reference.values) largest = std::max(largest, std::abs(value));
  const MaxError kernel_error = max_error(kernel, reference);
  const MaxError baseline_error = max_error(baseline, reference);
  const double allowed = kBaselineFactor * baseline_error.value + kFloorFloat32Ulps * kFloat32Epsilon * largest;
  std::ostringstream summary;
  summary << "kernel error " << kernel_error.value << " at " << position(reference, kernel_error.worst) << " (kernel "
          << kernel.values[kernel_error.worst] << ", reference " << reference.values[kernel_error.worst]
          << "); low-precision baseline error " << baseline_error.value << "; allowed " << allowed;
  if (kernel_error.value <= allowed) return ::testing::AssertionSuccess() << summary.str();
  return ::testing::AssertionFailure() << summary.str();
}

::testing::AssertionResult fully_written(const StridedTensor& view) {
  int64_t unwritten = 0;
  for (int64_t t = 0; t < view.tokens; ++t) {
    for (int64_t h = 0; h < view.heads; ++h) {
      for (int64_t i = 0; i < view.head_dim; ++i) unwritten += view.storage->is_poison(view.index(t, h, i));
    }
  }
  if (unwritten == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << unwritten << " of " << view.tokens * view.heads * view.head_dim
                                       << " elements never written";
}

::testing::AssertionResult fully_written(const LseBuffer& lse) {
  const LseBuffer poisoned(lse.heads, lse.tokens, lse.head_stride);
  int64_t unwritten = 0;
  for (int64_t h = 0; h < lse.heads; ++h) {
    for (int64_t t = 0; t < lse.tokens; ++t) {
      const size_t e = h * lse.head_stride + t;
      unwritten += std::memcmp(&lse.values[e], &poisoned.values[e], sizeof(float)) == 0;
    }
  }
  if (unwritten == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << unwritten << " of " << lse.heads * lse.tokens << " LSE entries never written";
}

::testing::AssertionResult nothing_written_outside_views(const HostTensors& host) {
  std::ostringstream failures;
  for (const auto& storage : host.storages()) {
    std::vector<const StridedTensor*> inside;
    for (const StridedTensor* view : host.views()) {
      if (view->storage == storage) inside.push_back(view);
    }
    if (const int64_t written = count_written_outside(*storage, inside)) {
      failures << written << " elements outside the views of one storage were written; ";
    }
  }
  if (const int64_t written = host.lse.count_padding_written()) failures << written << " LSE padding entries written";
  if (failures.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures.str();
}

::testing::AssertionResult bitwise_equal(const Storage& first, const Storage& second) {
  if (first.bytes() == second.bytes()) return ::testing::AssertionSuccess();
  int64_t differing = 0;
  for (size_t b = 0; b < first.bytes().size(); ++b) differing += first.bytes()[b] != second.bytes()[b];
  return ::testing::AssertionFailure() << differing << " bytes differ between reruns";
}

::testing::AssertionResult identical(const oracle::DenseTensor& actual, const oracle::DenseTensor& expected) {
  if (!same_shape(actual, expected)) return ::testing::AssertionFailure() << "shape mismatch";
  for (size_t e = 0; e < expected.values.size(); ++e) {
    const bool both_nan = std::isnan(actual.values[e]) && std::isnan(expected.values[e]);
    if (!(actual.values[e] == expected.values[e]) && !both_nan) {
      return ::testing::AssertionFailure() << "changed at " << position(expected, e) << ": " << actual.values[e]
                                           << " instead of " << expected.values[e];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace dualkv_test
