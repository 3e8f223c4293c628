// The two operators of the torch library "dualkv", independent of the device they run on.
//
// The device-specific kernels (CPU, CUDA) differ only in the stream they pass; everything else,
// tensor conversion, output and workspace allocation, error translation, lives here once.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace dualkv::torch_binding {

// Schema: attention_forward(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens, Tensor parents,
//                           float? softmax_scale, bool deterministic, str kernel_family="auto")
//                           -> (Tensor out, Tensor lse)
// `deterministic` does not affect the forward pass; it is an argument so that the autograd
// formula registered in Python can hand it to the backward operator. kernel_family: "auto",
// "portable" or "hopper" (ExecutionOptions::kernel_family; checked, then ignored on the CPU);
// autograd hands it to the backward operator too.
std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     const at::Tensor& cu_seqlens, const at::Tensor& parents,
                                                     std::optional<double> softmax_scale,
                                                     c10::string_view kernel_family, void* stream);

// Schema: attention_backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,
//                            Tensor cu_seqlens, Tensor parents, float? softmax_scale,
//                            bool deterministic, str kernel_family="auto")
//                            -> (Tensor dq, Tensor dk, Tensor dv)
// kernel_family as in attention_forward. The deterministic backward also runs whenever
// torch.use_deterministic_algorithms(True) is in effect, as PyTorch's own operators with a
// deterministic alternative do.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& cu_seqlens, const at::Tensor& parents, std::optional<double> softmax_scale,
    bool deterministic, c10::string_view kernel_family, void* stream);

}  // namespace dualkv::torch_binding
