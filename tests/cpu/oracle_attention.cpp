#include "cpu/oracle_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace dualkv_test::oracle {
namespace {

void check_shapes(const DenseTensor& q, const DenseTensor& k, const DenseTensor& v, const KeyMask& mask) {
  const bool consistent = q.tokens == mask.size() && k.tokens == q.tokens && v.tokens == q.tokens &&
                          k.heads == v.heads && k.heads > 0 && q.heads % k.heads == 0 && k.dim == q.dim &&
                          v.dim == q.dim;
  if (!consistent) throw std::logic_error("oracle: inconsistent attention shapes");
}

double dot(const DenseTensor& a, int64_t ta, int64_t ha, const DenseTensor& b, int64_t tb, int64_t hb) {
  double sum = 0.0;
  for (int64_t i = 0; i < a.dim; ++i) sum += a.at(ta, ha, i) * b.at(tb, hb, i);
  return sum;
}

// Softmax probabilities of one query row over all T keys (0 where masked) and the row's LSE.
// The max is taken over finite scores only so that a NaN score still poisons the sum.
double softmax_row(const DenseTensor& q, const DenseTensor& k, const KeyMask& mask, double scale, int64_t query,
                   int64_t head, int64_t kv_head, std::vector<double>& probs) {
  probs.assign(q.tokens, 0.0);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t key = 0; key < q.tokens; ++key) {
    if (!mask.visible(query, key)) continue;
    probs[key] = scale * dot(q, query, head, k, key, kv_head);
    if (probs[key] > max_score) max_score = probs[key];
  }
  double sum = 0.0;
  for (int64_t key = 0; key < q.tokens; ++key) {
    if (mask.visible(query, key)) sum += std::exp(probs[key] - max_score);
  }
  const double lse = max_score + std::log(sum);
  for (int64_t key = 0; key < q.tokens; ++key) {
    probs[key] = mask.visible(query, key) ? std::exp(probs[key] - lse) : 0.0;
  }
  return lse;
}

}  // namespace

KeyMask KeyMask::causal(int64_t size) {
  KeyMask mask(size);
  for (int64_t q = 0; q < size; ++q) {
    for (int64_t k = 0; k <= q; ++k) mask.allow(q, k);
  }
  return mask;
}

int64_t KeyMask::count_visible() const {
  int64_t count = 0;
  for (unsigned char v : visible_) count += v;
  return count;
}

ForwardResult masked_attention_forward(const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                                       const KeyMask& mask, double scale) {
  check_shapes(q, k, v, mask);
  const int64_t group_size = q.heads / k.heads;
  ForwardResult result{DenseTensor(q.tokens, q.heads, q.dim), DenseTensor(q.tokens, q.heads, 1)};
  std::vector<double> probs;
  for (int64_t head = 0; head < q.heads; ++head) {
    const int64_t kv_head = head / group_size;
    for (int64_t query = 0; query < q.tokens; ++query) {
      result.lse.at(query, head, 0) = softmax_row(q, k, mask, scale, query, head, kv_head, probs);
      for (int64_t key = 0; key < q.tokens; ++key) {
        if (!mask.visible(query, key)) continue;
        for (int64_t i = 0; i < q.dim; ++i) {
          result.out.at(query, head, i) += probs[key] * v.at(key, kv_head, i);
        }
      }
    }
  }
  return result;
}

Gradients masked_attention_backward(const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                                    const DenseTensor& dout, const KeyMask& mask, double scale) {
  check_shapes(q, k, v, mask);
  const int64_t group_size = q.heads / k.heads;
  Gradients grads{DenseTensor(q.tokens, q.heads, q.dim), DenseTensor(k.tokens, k.heads, k.dim),
                  DenseTensor(v.tokens, v.heads, v.dim)};
  std::vector<double> probs;
  std::vector<double> dprobs(q.tokens);
  for (int64_t head = 0; head < q.heads; ++head) {
    const int64_t kv_head = head / group_size;
    for (int64_t query = 0; query < q.tokens; ++query) {
      softmax_row(q, k, mask, scale, query, head, kv_head, probs);
      // dL/dP_k = dout . v_k; the softmax Jacobian subtracts the row mean sum_k P_k dL/dP_k.
      double row_mean = 0.0;
      for (int64_t key = 0; key < q.tokens; ++key) {
        if (!mask.visible(query, key)) continue;
        dprobs[key] = dot(dout, query, head, v, key, kv_head);
        row_mean += probs[key] * dprobs[key];
      }
      for (int64_t key = 0; key < q.tokens; ++key) {
        if (!mask.visible(query, key)) continue;
        const double dscore = probs[key] * (dprobs[key] - row_mean);
        for (int64_t i = 0; i < q.dim; ++i) {
          grads.dq.at(query, head, i) += scale * dscore * k.at(key, kv_head, i);
          grads.dk.at(key, kv_head, i) += scale * dscore * q.at(query, head, i);
          grads.dv.at(key, kv_head, i) += probs[key] * dout.at(query, head, i);
        }
      }
    }
  }
  return grads;
}

}  // namespace dualkv_test::oracle
