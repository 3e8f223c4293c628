// CUDA kernels of the torch library "dualkv" (schemas in library_cpu.cpp): run on the tensors'
// device and torch's current stream, so that dualkv orders correctly with surrounding torch work.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <optional>

#include "attention_ops.h"
#include "token_scores_ops.h"

namespace dualkv::torch_binding {
namespace {

// The dispatcher routes a call here when any tensor argument is on CUDA, so the first one (q,
// logits) may be elsewhere: the core then reports the device mismatch by argument name, which a
// guard on a non-CUDA device would pre-empt with an internal assertion.
std::optional<c10::Device> cuda_device_of(const at::Tensor& first) {
  return first.is_cuda() ? std::optional<c10::Device>(first.device()) : std::nullopt;
}

void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

std::tuple<at::Tensor, at::Tensor> attention_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                          const at::Tensor& cu_seqlens, const at::Tensor& parents,
                                                          std::optional<double> softmax_scale,
                                                          bool /*deterministic: backward only*/,
                                                          c10::string_view kernel_family) {
  const c10::cuda::OptionalCUDAGuard device_guard(cuda_device_of(q));
  return attention_forward(q, k, v, cu_seqlens, parents, softmax_scale, kernel_family, current_stream());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_cuda(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& cu_seqlens, const at::Tensor& parents, std::optional<double> softmax_scale,
    bool deterministic, c10::string_view kernel_family) {
  const c10::cuda::OptionalCUDAGuard device_guard(cuda_device_of(q));
  return attention_backward(dout, q, k, v, out, lse, cu_seqlens, parents, softmax_scale, deterministic, kernel_family,
                            current_stream());
}

std::tuple<at::Tensor, at::Tensor> token_scores_forward_cuda(const at::Tensor& logits, double inverse_temperature) {
  const c10::cuda::OptionalCUDAGuard device_guard(cuda_device_of(logits));
  return token_scores_forward(logits, inverse_temperature, current_stream());
}

at::Tensor token_scores_backward_cuda(const at::Tensor& logits, double inverse_temperature, const at::Tensor& lse,
                                      const at::Tensor& entropy, const at::Tensor& use_offsets,
                                      const at::Tensor& targets, const at::Tensor& grad_logprob,
                                      const at::Tensor& grad_entropy) {
  const c10::cuda::OptionalCUDAGuard device_guard(cuda_device_of(logits));
  return token_scores_backward(logits, inverse_temperature, lse, entropy, use_offsets, targets, grad_logprob,
                               grad_entropy, current_stream());
}

}  // namespace

TORCH_LIBRARY_IMPL(dualkv, CUDA, m) {
  m.impl("attention_forward", &attention_forward_cuda);
  m.impl("attention_backward", &attention_backward_cuda);
  m.impl("token_scores_forward", &token_scores_forward_cuda);
  m.impl("token_scores_backward", &token_scores_backward_cuda);
}

}  // namespace dualkv::torch_binding
