// The token-score operators of the torch library "dualkv" (include/dualkv/token_scores.h),
// independent of the device they run on; the CPU and CUDA kernels differ only in the stream.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace dualkv::torch_binding {

// Schema: token_scores_forward(Tensor logits, float inverse_temperature) -> (Tensor lse, Tensor entropy)
// logits (rows, vocab) float32/float16/bfloat16 with a unit-stride last dimension; lse and entropy
// (rows,) float32.
std::tuple<at::Tensor, at::Tensor> token_scores_forward(const at::Tensor& logits, double inverse_temperature,
                                                        void* stream);

// Schema: token_scores_backward(Tensor logits, float inverse_temperature, Tensor lse, Tensor entropy,
//                               Tensor use_offsets, Tensor targets, Tensor grad_logprob,
//                               Tensor grad_entropy) -> Tensor grad_logits
// use_offsets (rows + 1,) and targets (uses,) int64; the gradients (uses,) float32; grad_logits
// is new, contiguous, of logits' shape and dtype.
at::Tensor token_scores_backward(const at::Tensor& logits, double inverse_temperature, const at::Tensor& lse,
                                 const at::Tensor& entropy, const at::Tensor& use_offsets, const at::Tensor& targets,
                                 const at::Tensor& grad_logprob, const at::Tensor& grad_entropy, void* stream);

}  // namespace dualkv::torch_binding
