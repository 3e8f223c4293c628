// fp64 reference attention with an explicit boolean mask: the dense math both oracles share.
//
// Written from the textbook definition (softmax over the visible keys, gradients by the chain
// rule), with no tiling, no online softmax and no code from the library, so that it can judge
// the library. Cost is O(T^2 H d); keep problems small.
#pragma once

#include <cstdint>
#include <vector>

namespace dualkv_test::oracle {

// A (tokens, heads, dim) fp64 tensor, contiguous in that order. The LSE is held as
// (tokens, heads, 1) so that every result compares with the same helpers.
struct DenseTensor {
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t dim = 0;
  std::vector<double> values;

  DenseTensor() = default;
  DenseTensor(int64_t tokens_, int64_t heads_, int64_t dim_)
      : tokens(tokens_), heads(heads_), dim(dim_), values(tokens_ * heads_ * dim_, 0.0) {}

  double& at(int64_t t, int64_t h, int64_t i) { return values[(t * heads + h) * dim + i]; }
  double at(int64_t t, int64_t h, int64_t i) const { return values[(t * heads + h) * dim + i]; }
};

// visible(q, k): whether query token q may attend to key token k. Square, size x size.
class KeyMask {
 public:
  explicit KeyMask(int64_t size) : size_(size), visible_(size * size, 0) {}

  static KeyMask causal(int64_t size);

  int64_t size() const { return size_; }
  bool visible(int64_t q, int64_t k) const { return visible_[q * size_ + k] != 0; }
  void allow(int64_t q, int64_t k) { visible_[q * size_ + k] = 1; }
  int64_t count_visible() const;

 private:
  int64_t size_;
  std::vector<unsigned char> visible_;
};

struct ForwardResult {
  DenseTensor out;  // (T, H, d)
  DenseTensor lse;  // (T, H, 1), natural log
};

struct Gradients {
  DenseTensor dq;  // (T, H, d)
  DenseTensor dk;  // (T, Hk, d)
  DenseTensor dv;  // (T, Hk, d)
};

// q: (T, H, d); k, v: (T, Hk, d) with H % Hk == 0; query head h reads kv head h / (H / Hk).
ForwardResult masked_attention_forward(const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                                       const KeyMask& mask, double scale);

// Gradients of sum(out * dout) with respect to q, k and v.
Gradients masked_attention_backward(const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                                    const DenseTensor& dout, const KeyMask& mask, double scale);

}  // namespace dualkv_test::oracle
