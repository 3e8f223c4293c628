// A synthetic shared-prompt batch: G groups, each a prompt and N responses, random Q/K/V/dO.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/dualkv.h"

namespace dualkv::tools {

struct BatchShape {
  int64_t groups = 2;
  int64_t responses = 8;   // N per group
  int64_t prompt = 1024;   // P of group 0; later groups get shorter prompts (P differs per group)
  int64_t response = 256;  // R, the longest response
  bool ragged = true;      // response lengths uniform in [R/2, R] instead of all R
  int64_t heads = 8;
  int64_t kv_heads = 2;
  int64_t head_dim = 64;
  DType dtype = DType::kFloat32;
  uint64_t seed = 1;
};

// Tensors are contiguous (tokens, heads, head_dim) floats holding values exactly representable
// in `dtype`, so every device and precision starts from identical inputs.
struct HostBatch {
  Layout layout;
  BatchShape shape;
  std::vector<float> q, k, v, dout;
};

HostBatch make_batch(const BatchShape& shape);

// P_g of group g: each later group's prompt is shorter by 1/(2G) of P, so groups differ in P (and
// every P_g > P/2 >= 1/2, so P >= 1 keeps every prompt non-empty).
int64_t prompt_length(const BatchShape& shape, int64_t group);

// Rounds each value to the nearest `dtype` value (identity for fp32).
void round_to_dtype(std::vector<float>& values, DType dtype);

}  // namespace dualkv::tools
