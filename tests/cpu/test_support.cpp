#include "cpu/test_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "host/float16.h"

namespace dualkv_test {
namespace {

constexpr uint32_t kPoisonFloat32 = 0x7fe5a5a5u;  // quiet NaN with an unusual payload
constexpr uint16_t kPoisonFloat16 = 0x7e5au;
constexpr uint16_t kPoisonBFloat16 = 0x7fe5u;

int element_bytes(dualkv::DType dtype) { return dtype == dualkv::DType::kFloat32 ? 4 : 2; }

// FNV-1a: stable across standard libraries, unlike std::hash.
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

std::mt19937_64 rng_for_current_test() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("no-test");
  return std::mt19937_64(fnv1a(name));
}

dualkv::Layout make_layout(const BatchSpec& batch) {
  std::vector<int64_t> prompts;
  std::vector<std::vector<int64_t>> responses;
  for (const GroupLengths& group : batch) {
    prompts.push_back(group.prompt);
    responses.push_back(group.responses);
  }
  return dualkv::Layout::from_lengths(prompts, responses);
}

double dtype_epsilon(dualkv::DType dtype) {
  switch (dtype) {
    case dualkv::DType::kFloat32:
      return std::ldexp(1.0, -23);
    case dualkv::DType::kFloat16:
      return std::ldexp(1.0, -10);
    case dualkv::DType::kBFloat16:
      return std::ldexp(1.0, -7);
  }
  return 1.0;
}

double accumulation_epsilon(dualkv::Accumulation accumulation) {
  return accumulation == dualkv::Accumulation::kFloat64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23);
}

Storage::Storage(dualkv::DType dtype, int64_t elements)
    : dtype_(dtype), elements_(elements), bytes_(elements * element_bytes(dtype)) {}

double Storage::read(int64_t index) const {
  if (dtype_ == dualkv::DType::kFloat32) {
    float value;
    std::memcpy(&value, &bytes_[index * 4], 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, &bytes_[index * 2], 2);
  return dtype_ == dualkv::DType::kFloat16 ? dualkv::detail::fp16_to_float(bits) : dualkv::detail::bf16_to_float(bits);
}

void Storage::write(int64_t index, double value) {
  // double -> float -> 16 bit rounds twice; harmless here because every value written is
  // already representable in float (uniform draws, or copies of stored values).
  const auto single = static_cast<float>(value);
  if (dtype_ == dualkv::DType::kFloat32) {
    std::memcpy(&bytes_[index * 4], &single, 4);
    return;
  }
  const uint16_t bits =
      dtype_ == dualkv::DType::kFloat16 ? dualkv::detail::float_to_fp16(single) : dualkv::detail::float_to_bf16(single);
  std::memcpy(&bytes_[index * 2], &bits, 2);
}

void Storage::poison() {
  for (int64_t i = 0; i < elements_; ++i) {
    switch (dtype_) {
      case dualkv::DType::kFloat32:
        std::memcpy(&bytes_[i * 4], &kPoisonFloat32, 4);
        break;
      case dualkv::DType::kFloat16:
        std::memcpy(&bytes_[i * 2], &kPoisonFloat16, 2);
        break;
      case dualkv::DType::kBFloat16:
        std::memcpy(&bytes_[i * 2], &kPoisonBFloat16, 2);
        break;
    }
  }
}

bool Storage::is_poison(int64_t index) const {
  if (dtype_ == dualkv::DType::kFloat32) {
    return std::memcmp(&bytes_[index * 4], &kPoisonFloat32, 4) == 0;
  }
  const uint16_t poison = dtype_ == dualkv::DType::kFloat16 ? kPoisonFloat16 : kPoisonBFloat16;
  return std::memcmp(&bytes_[index * 2], &poison, 2) == 0;
}

dualkv::InputTensor StridedTensor::input() const {
  dualkv::InputTensor view;
  view.data = static_cast<const unsigned char*>(storage->data()) + offset * element_bytes(storage->dtype());
  view.dtype = storage->dtype();
  view.tokens = tokens;
  view.heads = heads;
  view.head_dim = head_dim;
  view.token_stride = token_stride;
  view.head_stride = head_stride;
  return view;
}

dualkv::OutputTensor StridedTensor::output() const {
  const dualkv::InputTensor in = input();
  dualkv::OutputTensor view;
  view.data = const_cast<void*>(in.data);
  view.dtype = in.dtype;
  view.tokens = in.tokens;
  view.heads = in.heads;
  view.head_dim = in.head_dim;
  view.token_stride = in.token_stride;
  view.head_stride = in.head_stride;
  return view;
}

void fill_uniform(StridedTensor& tensor, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t t = 0; t < tensor.tokens; ++t) {
    for (int64_t h = 0; h < tensor.heads; ++h) {
      for (int64_t i = 0; i < tensor.head_dim; ++i) tensor.write(t, h, i, uniform(rng));
    }
  }
}

DenseTensor to_dense(const StridedTensor& tensor) {
  DenseTensor dense(tensor.tokens, tensor.heads, tensor.head_dim);
  for (int64_t t = 0; t < tensor.tokens; ++t) {
    for (int64_t h = 0; h < tensor.heads; ++h) {
      for (int64_t i = 0; i < tensor.head_dim; ++i) dense.at(t, h, i) = tensor.read(t, h, i);
    }
  }
  return dense;
}

LseBuffer::LseBuffer(int64_t heads_, int64_t tokens_, int64_t head_stride_)
    : heads(heads_), tokens(tokens_), head_stride(head_stride_), values(heads_ * head_stride_) {
  poison();
}

void LseBuffer::poison() {
  for (float& value : values) std::memcpy(&value, &kPoisonFloat32, 4);
}

dualkv::LseOutput LseBuffer::output() {
  dualkv::LseOutput view;
  view.data = values.data();
  view.heads = heads;
  view.tokens = tokens;
  view.head_stride = head_stride;
  return view;
}

dualkv::LseInput LseBuffer::input() const {
  dualkv::LseInput view;
  view.data = values.data();
  view.heads = heads;
  view.tokens = tokens;
  view.head_stride = head_stride;
  return view;
}

DenseTensor LseBuffer::to_dense() const {
  DenseTensor dense(tokens, heads, 1);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < tokens; ++t) dense.at(t, h, 0) = values[h * head_stride + t];
  }
  return dense;
}

int64_t LseBuffer::count_padding_written() const {
  int64_t written = 0;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = tokens; t < head_stride; ++t) {
      written += std::memcmp(&values[h * head_stride + t], &kPoisonFloat32, 4) != 0;
    }
  }
  return written;
}

int64_t count_written_outside(const Storage& storage, const std::vector<const StridedTensor*>& views) {
  std::vector<bool> inside(storage.elements(), false);
  for (const StridedTensor* view : views) {
    for (int64_t t = 0; t < view->tokens; ++t) {
      for (int64_t h = 0; h < view->heads; ++h) {
        for (int64_t i = 0; i < view->head_dim; ++i) inside[view->index(t, h, i)] = true;
      }
    }
  }
  int64_t written = 0;
  for (int64_t e = 0; e < storage.elements(); ++e) {
    written += !inside[e] && !storage.is_poison(e);
  }
  return written;
}

::testing::AssertionResult all_close(const DenseTensor& actual, const DenseTensor& expected, double tolerance) {
  if (actual.tokens != expected.tokens || actual.heads != expected.heads || actual.dim != expected.dim) {
    return ::testing::AssertionFailure() << "shape mismatch";
  }
  double sum_squares = 0.0;
  for (double value : expected.values) sum_squares += value * value;
  const double rms = std::sqrt(sum_squares / std::max<size_t>(expected.values.size(), 1));

  int64_t failures = 0;
  size_t worst = 0;
  double worst_ratio = -1.0;
  for (size_t e = 0; e < expected.values.size(); ++e) {
    const double error = std::abs(actual.values[e] - expected.values[e]);
    const double allowed = tolerance * (std::abs(expected.values[e]) + rms);
    // Written so that NaN (in either tensor) lands in the failing branch.
    const double ratio =
        std::isfinite(error) && std::isfinite(allowed) ? error / allowed : std::numeric_limits<double>::infinity();
    if (!(error <= allowed)) ++failures;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = e;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  const auto per_token = static_cast<size_t>(expected.heads * expected.dim);
  std::ostringstream message;
  message << failures << " of " << expected.values.size() << " elements out of tolerance " << tolerance << " (rms "
          << rms << "); worst at token " << worst / per_token << ", head " << (worst % per_token) / expected.dim
          << ", index " << worst % expected.dim << ": actual " << actual.values[worst] << ", expected "
          << expected.values[worst] << " (" << worst_ratio << "x the allowed error)";
  return ::testing::AssertionFailure() << message.str();
}

}  // namespace dualkv_test
