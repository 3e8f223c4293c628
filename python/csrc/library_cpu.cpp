// The torch library "dualkv": operator schemas and their CPU kernels.
//
// Fake (meta) kernels and the autograd formula are registered in Python
// (python/dualkv/_attention.py), which set_python_module() names so that torch can point a
// user who loads this library without the package at the module that completes it.
#include <torch/library.h>

#include "attention_ops.h"

namespace dualkv::torch_binding {
namespace {

std::tuple<at::Tensor, at::Tensor> attention_forward_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                         const at::Tensor& cu_seqlens, const at::Tensor& cu_groups,
                                                         std::optional<double> softmax_scale,
                                                         bool /*deterministic: backward only*/,
                                                         c10::string_view kernel_family) {
  return attention_forward(q, k, v, cu_seqlens, cu_groups, softmax_scale, kernel_family, /*stream=*/nullptr);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_cpu(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& cu_seqlens, const at::Tensor& cu_groups,
    std::optional<double> softmax_scale, bool deterministic, c10::string_view kernel_family) {
  return attention_backward(dout, q, k, v, out, lse, cu_seqlens, cu_groups, softmax_scale, deterministic, kernel_family,
                            /*stream=*/nullptr);
}

}  // namespace

TORCH_LIBRARY(dualkv, m) {
  m.set_python_module("dualkv._attention");
  m.def(
      "attention_forward(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens, Tensor cu_groups, "
      "float? softmax_scale, bool deterministic, str kernel_family=\"auto\") -> (Tensor out, Tensor lse)",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "attention_backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "Tensor cu_seqlens, Tensor cu_groups, float? softmax_scale, bool deterministic, "
      "str kernel_family=\"auto\") -> (Tensor dq, Tensor dk, Tensor dv)",
      {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(dualkv, CPU, m) {
  m.impl("attention_forward", &attention_forward_cpu);
  m.impl("attention_backward", &attention_backward_cpu);
}

}  // namespace dualkv::torch_binding
