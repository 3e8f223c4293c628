#include "cpu/oracle_dense_mask.h"

#include <vector>

namespace dualkv_test::oracle {
namespace {

// Per token: which group it belongs to, which segment (numbered across the whole batch), and
// whether it is a prompt token. Assigned by walking the lengths in packed order.
struct TokenLabels {
  std::vector<int64_t> group;
  std::vector<int64_t> segment;
  std::vector<bool> in_prompt;
};

TokenLabels label_tokens(const BatchSpec& batch) {
  TokenLabels labels;
  int64_t segment = 0;
  auto label = [&](int64_t group, int64_t length, bool prompt) {
    for (int64_t i = 0; i < length; ++i) {
      labels.group.push_back(group);
      labels.segment.push_back(segment);
      labels.in_prompt.push_back(prompt);
    }
    ++segment;
  };
  for (int64_t g = 0; g < static_cast<int64_t>(batch.size()); ++g) {
    label(g, batch[g].prompt, true);
    for (int64_t length : batch[g].responses) label(g, length, false);
  }
  return labels;
}

}  // namespace

KeyMask packed_mask(const BatchSpec& batch) {
  const TokenLabels labels = label_tokens(batch);
  const auto tokens = static_cast<int64_t>(labels.group.size());
  KeyMask mask(tokens);
  for (int64_t q = 0; q < tokens; ++q) {
    for (int64_t k = 0; k <= q; ++k) {
      const bool same_group = labels.group[k] == labels.group[q];
      const bool shared_or_own = labels.in_prompt[k] || labels.segment[k] == labels.segment[q];
      if (same_group && shared_or_own) mask.allow(q, k);
    }
  }
  return mask;
}

ForwardResult dense_mask_forward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k,
                                 const DenseTensor& v, double scale) {
  return masked_attention_forward(q, k, v, packed_mask(batch), scale);
}

Gradients dense_mask_backward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                              const DenseTensor& dout, double scale) {
  return masked_attention_backward(q, k, v, dout, packed_mask(batch), scale);
}

}  // namespace dualkv_test::oracle
