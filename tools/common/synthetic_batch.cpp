#include "common/synthetic_batch.h"

#include <algorithm>
#include <random>

#include "host/float16.h"

namespace dualkv::tools {

void round_to_dtype(std::vector<float>& values, DType dtype) {
  for (float& x : values) {
    if (dtype == DType::kFloat16) x = detail::fp16_to_float(detail::float_to_fp16(x));
    if (dtype == DType::kBFloat16) x = detail::bf16_to_float(detail::float_to_bf16(x));
  }
}

int64_t prompt_length(const BatchShape& shape, int64_t group) {
  return shape.prompt - group * shape.prompt / (2 * shape.groups);
}

HostBatch make_batch(const BatchShape& shape) {
  std::mt19937_64 rng(shape.seed);
  std::vector<int64_t> prompt_lengths;
  std::vector<std::vector<int64_t>> response_lengths;
  for (int64_t g = 0; g < shape.groups; ++g) {
    prompt_lengths.push_back(prompt_length(shape, g));
    std::uniform_int_distribution<int64_t> length(std::max<int64_t>(1, shape.response / 2), shape.response);
    std::vector<int64_t> lengths;
    for (int64_t i = 0; i < shape.responses; ++i) lengths.push_back(shape.ragged ? length(rng) : shape.response);
    response_lengths.push_back(std::move(lengths));
  }
  HostBatch batch{Layout::from_lengths(prompt_lengths, response_lengths), shape, {}, {}, {}, {}};
  const int64_t tokens = batch.layout.total_tokens();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random_tensor = [&](int64_t heads) {
    std::vector<float> values(static_cast<size_t>(tokens * heads * shape.head_dim));
    for (float& x : values) x = normal(rng);
    round_to_dtype(values, shape.dtype);
    return values;
  };
  batch.q = random_tensor(shape.heads);
  batch.k = random_tensor(shape.kv_heads);
  batch.v = random_tensor(shape.kv_heads);
  batch.dout = random_tensor(shape.heads);
  return batch;
}

}  // namespace dualkv::tools
