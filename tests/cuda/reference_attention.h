// Plain causal attention in fp32 on the GPU: the suite's independent reference and the source of
// its low-precision error baseline.
//
// Sequences are packed back to back and described by cu_seqlens; each is ordinary causal
// attention (key k visible to query q iff both are in the sequence and k <= q). Tensors are
// contiguous row-major host arrays: q (rows, heads, dim), k and v (rows, kv_heads, dim),
// lse (heads, rows). Query head h reads kv head h / (heads / kv_heads).
#pragma once

#include <cstdint>
#include <vector>

namespace dualkv_test::cuda_reference {

// What a tensor-core attention kernel rounds to its 16-bit operand type before a matrix
// product: the probabilities P (before P.V and P^T.dO) and the score gradients dS (before dS.K
// and dS^T.Q). kNone keeps every intermediate in fp32.
enum class OperandRounding { kNone, kFloat16, kBFloat16 };

struct Shape {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t dim = 0;
  float scale = 0.0f;
};

struct ForwardResult {
  std::vector<float> out;  // (rows, heads, dim), normalised by the unrounded row sum
  std::vector<float> lse;  // (heads, rows), natural log
};

struct Gradients {
  std::vector<float> dq;  // (rows, heads, dim)
  std::vector<float> dk;  // (rows, kv_heads, dim)
  std::vector<float> dv;  // (rows, kv_heads, dim)
};

ForwardResult causal_forward(const std::vector<int32_t>& cu_seqlens, const Shape& shape, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v, OperandRounding rounding);

// Gradients of sum(out * dout); out and lse are inputs (as the forward produced them), so that
// the backward computes the same function the library's backward does.
Gradients causal_backward(const std::vector<int32_t>& cu_seqlens, const Shape& shape, const std::vector<float>& q,
                          const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& out,
                          const std::vector<float>& lse, const std::vector<float>& dout, OperandRounding rounding);

}  // namespace dualkv_test::cuda_reference
