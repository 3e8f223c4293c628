#include "token_scores_ops.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include "dualkv/token_scores.h"
#include "error_translation.h"
#include "tensor_views.h"

namespace dualkv::torch_binding {
namespace {

ExecutionOptions options_on(void* stream) {
  ExecutionOptions options;
  options.cpu_threads = at::get_num_threads();  // honour torch.set_num_threads
  options.stream = stream;
  return options;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> token_scores_forward(const at::Tensor& logits, double inverse_temperature,
                                                        void* stream) {
  return translate_errors([&] {
    TokenScoresForwardParams params;
    params.logits = vocab_rows_input(logits, "logits");
    const auto options = logits.options().dtype(at::kFloat);
    at::Tensor lse = at::empty({logits.size(0)}, options);
    at::Tensor entropy = at::empty({logits.size(0)}, options);
    params.lse = float_values_output(lse, "lse");
    params.entropy = float_values_output(entropy, "entropy");
    params.inverse_temperature = static_cast<float>(inverse_temperature);
    params.options = options_on(stream);
    dualkv::token_scores_forward(params);
    return std::make_tuple(lse, entropy);
  });
}

at::Tensor token_scores_backward(const at::Tensor& logits, double inverse_temperature, const at::Tensor& lse,
                                 const at::Tensor& entropy, const at::Tensor& use_offsets, const at::Tensor& targets,
                                 const at::Tensor& grad_logprob, const at::Tensor& grad_entropy, void* stream) {
  return translate_errors([&] {
    TokenScoresBackwardParams params;
    params.logits = vocab_rows_input(logits, "logits");
    params.lse = float_values_input(lse, "lse");
    params.entropy = float_values_input(entropy, "entropy");
    params.uses.offsets = index_values_input(use_offsets, "uses.offsets");
    params.uses.targets = index_values_input(targets, "uses.targets");
    params.uses.grad_logprob = float_values_input(grad_logprob, "uses.grad_logprob");
    params.uses.grad_entropy = float_values_input(grad_entropy, "uses.grad_entropy");
    at::Tensor grad_logits = at::empty(logits.sizes(), logits.options());
    params.grad_logits = vocab_rows_output(grad_logits, "grad_logits");
    params.inverse_temperature = static_cast<float>(inverse_temperature);
    params.options = options_on(stream);
    dualkv::token_scores_backward(params);
    return grad_logits;
  });
}

}  // namespace dualkv::torch_binding
