// The torch library "dualkv": operator schemas and their CPU kernels.
//
// Fake (meta) kernels and the autograd formula are registered in Python
// (python/dualkv/_attention.py), which set_python_module() names so that torch can point a
// user who loads this library without the package at the module that completes it.
#include <torch/library.h>

#include "attention_ops.h"
#include "token_scores_ops.h"

namespace dualkv::torch_binding {
namespace {

std::tuple<at::Tensor, at::Tensor> attention_forward_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                         const at::Tensor& cu_seqlens, const at::Tensor& parents,
                                                         std::optional<double> softmax_scale,
                                                         bool /*deterministic: backward only*/,
                                                         c10::string_view kernel_family) {
  return attention_forward(q, k, v, cu_seqlens, parents, softmax_scale, kernel_family, /*stream=*/nullptr);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_cpu(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& cu_seqlens, const at::Tensor& parents, std::optional<double> softmax_scale,
    bool deterministic, c10::string_view kernel_family) {
  return attention_backward(dout, q, k, v, out, lse, cu_seqlens, parents, softmax_scale, deterministic, kernel_family,
                            /*stream=*/nullptr);
}

std::tuple<at::Tensor, at::Tensor> token_scores_forward_cpu(const at::Tensor& logits, double inverse_temperature) {
  return token_scores_forward(logits, inverse_temperature, /*stream=*/nullptr);
}

at::Tensor token_scores_backward_cpu(const at::Tensor& logits, double inverse_temperature, const at::Tensor& lse,
                                     const at::Tensor& entropy, const at::Tensor& use_offsets,
                                     const at::Tensor& targets, const at::Tensor& grad_logprob,
                                     const at::Tensor& grad_entropy) {
  return token_scores_backward(logits, inverse_temperature, lse, entropy, use_offsets, targets, grad_logprob,
                               grad_entropy, /*stream=*/nullptr);
}

// cudagraph_unsafe: the attention kernels read work plans built on the host from the CPU offset
// tensors, and a CUDA graph keeps the plans of the layout it captured. torch.cuda.graph around
// the op is fine (the caller captures one layout); the CUDA graphs torch.compile makes on its own
// (mode="reduce-overhead") would replay one layout's work for another of the same shapes, so
// Inductor must run these ops outside them.
const std::vector<at::Tag> kAttentionTags = {at::Tag::pt2_compliant_tag, at::Tag::cudagraph_unsafe};

}  // namespace

TORCH_LIBRARY(dualkv, m) {
  m.set_python_module("dualkv._attention");
  m.def(
      "attention_forward(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens, Tensor parents, "
      "float? softmax_scale, bool deterministic, str kernel_family=\"auto\") -> (Tensor out, Tensor lse)",
      kAttentionTags);
  m.def(
      "attention_backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "Tensor cu_seqlens, Tensor parents, float? softmax_scale, bool deterministic, "
      "str kernel_family=\"auto\") -> (Tensor dq, Tensor dk, Tensor dv)",
      kAttentionTags);
  m.def("token_scores_forward(Tensor logits, float inverse_temperature) -> (Tensor lse, Tensor entropy)",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "token_scores_backward(Tensor logits, float inverse_temperature, Tensor lse, Tensor entropy, "
      "Tensor use_offsets, Tensor targets, Tensor grad_logprob, Tensor grad_entropy) -> Tensor grad_logits",
      {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(dualkv, CPU, m) {
  m.impl("attention_forward", &attention_forward_cpu);
  m.impl("attention_backward", &attention_backward_cpu);
  m.impl("token_scores_forward", &token_scores_forward_cpu);
  m.impl("token_scores_backward", &token_scores_backward_cpu);
}

}  // namespace dualkv::torch_binding
