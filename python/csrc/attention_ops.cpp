#include "attention_ops.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <memory>
#include <string>

#include "dualkv/dualkv.h"
#include "error_translation.h"
#include "layout_registry.h"
#include "tensor_views.h"

namespace dualkv::torch_binding {
namespace {

KernelFamily parse_kernel_family(c10::string_view name) {
  if (name == "auto") return KernelFamily::kAuto;
  if (name == "portable") return KernelFamily::kPortable;
  if (name == "hopper") return KernelFamily::kHopper;
  throw Error("kernel_family", "must be \"auto\", \"portable\" or \"hopper\", got \"" + std::string(name) + "\"");
}

float resolve_softmax_scale(std::optional<double> softmax_scale, int64_t head_dim) {
  return softmax_scale ? static_cast<float>(*softmax_scale) : default_softmax_scale(head_dim);
}

ExecutionOptions execution_options(void* stream) {
  ExecutionOptions options;
  options.cpu_threads = at::get_num_threads();  // honour torch.set_num_threads
  options.stream = stream;
  return options;
}

// Device scratch of `bytes` bytes; the returned tensor owns it and must outlive the call (an
// undefined tensor when no scratch is needed). Allocated through torch so that its caching
// allocator, not a raw cudaMalloc per call, serves it.
at::Tensor attach_workspace(size_t bytes, const at::Device& device, ExecutionOptions& options) {
  if (bytes == 0) return {};
  at::Tensor workspace = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(device));
  options.workspace = workspace.mutable_data_ptr();
  options.workspace_bytes = bytes;
  return workspace;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     const at::Tensor& cu_seqlens, const at::Tensor& parents,
                                                     std::optional<double> softmax_scale,
                                                     c10::string_view kernel_family, void* stream) {
  return translate_errors([&] {
    const std::shared_ptr<const Layout> layout = layout_of_call(cu_seqlens, parents);
    const at::Tensor q_in = in_viewable_layout(q);
    const at::Tensor k_in = in_viewable_layout(k);
    const at::Tensor v_in = in_viewable_layout(v);

    ForwardParams params;
    params.q = input_view(q_in, "q");
    params.k = input_view(k_in, "k");
    params.v = input_view(v_in, "v");
    at::Tensor out = at::empty(q_in.sizes(), q_in.options());
    at::Tensor lse = at::empty({params.q.heads, params.q.tokens}, q_in.options().dtype(at::kFloat));
    params.out = output_view(out, "out");
    params.lse = lse_output_view(lse, "lse");
    params.softmax_scale = resolve_softmax_scale(softmax_scale, params.q.head_dim);
    params.options = execution_options(stream);
    params.options.kernel_family = parse_kernel_family(kernel_family);
    const at::Tensor workspace =
        attach_workspace(forward_workspace_bytes(*layout, params), q_in.device(), params.options);

    forward(*layout, params);
    return std::make_tuple(out, lse);
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& cu_seqlens, const at::Tensor& parents, std::optional<double> softmax_scale,
    bool deterministic, c10::string_view kernel_family, void* stream) {
  return translate_errors([&] {
    const std::shared_ptr<const Layout> layout = layout_of_call(cu_seqlens, parents);
    const at::Tensor dout_in = in_viewable_layout(dout);
    const at::Tensor q_in = in_viewable_layout(q);
    const at::Tensor k_in = in_viewable_layout(k);
    const at::Tensor v_in = in_viewable_layout(v);
    const at::Tensor out_in = in_viewable_layout(out);
    const at::Tensor lse_in = in_viewable_layout(lse);

    BackwardParams params;
    params.dout = input_view(dout_in, "dout");
    params.q = input_view(q_in, "q");
    params.k = input_view(k_in, "k");
    params.v = input_view(v_in, "v");
    params.out = input_view(out_in, "out");
    params.lse = lse_input_view(lse_in, "lse");
    at::Tensor dq = at::empty(q_in.sizes(), q_in.options());
    at::Tensor dk = at::empty(k_in.sizes(), k_in.options());
    at::Tensor dv = at::empty(v_in.sizes(), v_in.options());
    params.dq = output_view(dq, "dq");
    params.dk = output_view(dk, "dk");
    params.dv = output_view(dv, "dv");
    params.softmax_scale = resolve_softmax_scale(softmax_scale, params.q.head_dim);
    params.deterministic = deterministic || at::globalContext().deterministicAlgorithms();
    params.options = execution_options(stream);
    params.options.kernel_family = parse_kernel_family(kernel_family);
    const at::Tensor workspace =
        attach_workspace(backward_workspace_bytes(*layout, params), q_in.device(), params.options);

    backward(*layout, params);
    return std::make_tuple(dq, dk, dv);
  });
}

}  // namespace dualkv::torch_binding
