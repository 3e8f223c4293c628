#include "attention_problem.h"

#include <algorithm>
#include <stdexcept>

#include "cpu/oracle_tree.h"
#include "ncopy_reference.h"

namespace dualkv_test {
namespace {

constexpr dualkv::Device kCudaDevice{dualkv::DeviceKind::kCuda, 0};

// Padding that keeps every row on a 16-byte boundary (the kernels' vector width) while making
// the strides differ from any contiguous layout.
constexpr int64_t kRowPadding = 8;

StridedTensor view_of(std::shared_ptr<Storage> storage, int64_t offset, int64_t tokens, int64_t heads, int64_t head_dim,
                      int64_t token_stride, int64_t head_stride) {
  StridedTensor view;
  view.storage = std::move(storage);
  view.offset = offset;
  view.tokens = tokens;
  view.heads = heads;
  view.head_dim = head_dim;
  view.token_stride = token_stride;
  view.head_stride = head_stride;
  return view;
}

StridedTensor contiguous(dualkv::DType dtype, int64_t tokens, int64_t heads, int64_t head_dim) {
  return view_of(std::make_shared<Storage>(dtype, tokens * heads * head_dim), 0, tokens, heads, head_dim,
                 heads * head_dim, head_dim);
}

// q, k, v (or dq, dk, dv) as slices of one (tokens, heads + 2 kv_heads, head_dim) buffer.
std::vector<StridedTensor> fused_triple(dualkv::DType dtype, int64_t tokens, int64_t heads, int64_t kv_heads,
                                        int64_t head_dim) {
  const int64_t token_stride = (heads + 2 * kv_heads) * head_dim;
  auto storage = std::make_shared<Storage>(dtype, tokens * token_stride);
  return {view_of(storage, 0, tokens, heads, head_dim, token_stride, head_dim),
          view_of(storage, heads * head_dim, tokens, kv_heads, head_dim, token_stride, head_dim),
          view_of(storage, (heads + kv_heads) * head_dim, tokens, kv_heads, head_dim, token_stride, head_dim)};
}

// A head-major (heads, tokens, head_dim) view with padded rows, one spare row per head and a
// leading gap.
StridedTensor padded_head_major(dualkv::DType dtype, int64_t tokens, int64_t heads, int64_t head_dim) {
  const int64_t token_stride = head_dim + kRowPadding;
  const int64_t head_stride = (tokens + 1) * token_stride;
  auto storage = std::make_shared<Storage>(dtype, kRowPadding + heads * head_stride);
  return view_of(storage, kRowPadding, tokens, heads, head_dim, token_stride, head_stride);
}

template <typename View>
View with_device(View view) {
  view.device = kCudaDevice;
  return view;
}

StridedTensor float32_copy(const oracle::DenseTensor& dense) {
  StridedTensor tensor = contiguous(dualkv::DType::kFloat32, dense.tokens, dense.heads, dense.dim);
  for (int64_t t = 0; t < dense.tokens; ++t) {
    for (int64_t h = 0; h < dense.heads; ++h) {
      for (int64_t i = 0; i < dense.dim; ++i) tensor.write(t, h, i, dense.at(t, h, i));
    }
  }
  return tensor;
}

LseBuffer lse_copy(const oracle::DenseTensor& lse) {
  LseBuffer buffer(lse.heads, lse.tokens, lse.tokens);
  for (int64_t h = 0; h < lse.heads; ++h) {
    for (int64_t t = 0; t < lse.tokens; ++t) buffer.values[h * lse.tokens + t] = static_cast<float>(lse.at(t, h, 0));
  }
  return buffer;
}

dualkv::ExecutionOptions cpu_fp64_options() {
  dualkv::ExecutionOptions options;
  options.accumulation = dualkv::Accumulation::kFloat64;
  return options;
}

template <typename Params>
void run_with_workspace(const dualkv::Layout& layout, Params params, size_t workspace_bytes,
                        void (*entry)(const dualkv::Layout&, const Params&)) {
  const DeviceBytes workspace(workspace_bytes);
  const Stream stream;
  params.options.workspace = workspace.data();
  params.options.workspace_bytes = workspace.bytes();
  params.options.stream = stream.get();
  entry(layout, params);
  check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize after the library call");
}

}  // namespace

std::vector<const StridedTensor*> HostTensors::views() const { return {&q, &k, &v, &dout, &out, &dq, &dk, &dv}; }

std::vector<std::shared_ptr<Storage>> HostTensors::storages() const {
  std::vector<std::shared_ptr<Storage>> distinct;
  for (const StridedTensor* view : views()) {
    if (std::find(distinct.begin(), distinct.end(), view->storage) == distinct.end()) distinct.push_back(view->storage);
  }
  return distinct;
}

HostTensors make_host_tensors(Placement placement, dualkv::DType dtype, int64_t tokens, int64_t heads, int64_t kv_heads,
                              int64_t head_dim) {
  if (placement == Placement::kContiguous) {
    auto tensor = [&](int64_t h) { return contiguous(dtype, tokens, h, head_dim); };
    HostTensors host{tensor(heads),    tensor(kv_heads), tensor(kv_heads),
                     tensor(heads),    tensor(heads),    tensor(heads),
                     tensor(kv_heads), tensor(kv_heads), LseBuffer(heads, tokens, tokens)};
    for (const auto& storage : host.storages()) storage->poison();
    return host;
  }
  const std::vector<StridedTensor> inputs = fused_triple(dtype, tokens, heads, kv_heads, head_dim);
  const std::vector<StridedTensor> grads = fused_triple(dtype, tokens, heads, kv_heads, head_dim);
  // An odd LSE head stride: nothing may assume the LSE rows are packed or aligned.
  HostTensors host{inputs[0],
                   inputs[1],
                   inputs[2],
                   padded_head_major(dtype, tokens, heads, head_dim),
                   padded_head_major(dtype, tokens, heads, head_dim),
                   grads[0],
                   grads[1],
                   grads[2],
                   LseBuffer(heads, tokens, tokens + 3)};
  for (const auto& storage : host.storages()) storage->poison();
  return host;
}

DeviceTensors::DeviceTensors(HostTensors& host) : host_(host), lse_(host.lse.values.size() * sizeof(float)) {
  for (const auto& storage : host.storages()) {
    auto memory = std::make_unique<DeviceBytes>(storage->bytes().size());
    memory->upload(storage->bytes().data());
    storages_.emplace_back(storage.get(), std::move(memory));
  }
  upload_lse();
}

DeviceBytes& DeviceTensors::memory_of(const StridedTensor& view) const {
  for (const auto& [storage, memory] : storages_) {
    if (storage == view.storage.get()) return *memory;
  }
  throw std::logic_error("DeviceTensors: view of a storage it does not mirror");
}

void DeviceTensors::upload(const StridedTensor& view) { memory_of(view).upload(view.storage->bytes().data()); }
void DeviceTensors::download(const StridedTensor& view) { memory_of(view).download(view.storage->data()); }
void DeviceTensors::upload_lse() { lse_.upload(host_.lse.values.data()); }
void DeviceTensors::download_lse() { lse_.download(host_.lse.values.data()); }

dualkv::InputTensor DeviceTensors::input(const StridedTensor& view) const {
  dualkv::InputTensor tensor = with_device(view.input());
  const auto host_base = static_cast<const unsigned char*>(view.storage->data());
  tensor.data = static_cast<const unsigned char*>(memory_of(view).data()) +
                (static_cast<const unsigned char*>(tensor.data) - host_base);
  return tensor;
}

dualkv::OutputTensor DeviceTensors::output(const StridedTensor& view) const {
  const dualkv::InputTensor in = input(view);
  dualkv::OutputTensor tensor = with_device(view.output());
  tensor.data = const_cast<void*>(in.data);
  return tensor;
}

dualkv::LseInput DeviceTensors::lse_input() const {
  dualkv::LseInput lse = with_device(host_.lse.input());
  lse.data = static_cast<const float*>(lse_.data());
  return lse;
}

dualkv::LseOutput DeviceTensors::lse_output() const {
  dualkv::LseOutput lse = with_device(host_.lse.output());
  lse.data = static_cast<float*>(lse_.data());
  return lse;
}

dualkv::ForwardParams device_forward_params(const DeviceTensors& device, const HostTensors& host, float scale) {
  dualkv::ForwardParams params;
  params.q = device.input(host.q);
  params.k = device.input(host.k);
  params.v = device.input(host.v);
  params.out = device.output(host.out);
  params.lse = device.lse_output();
  params.softmax_scale = scale;
  return params;
}

dualkv::BackwardParams device_backward_params(const DeviceTensors& device, const HostTensors& host, float scale,
                                              bool deterministic) {
  dualkv::BackwardParams params;
  params.dout = device.input(host.dout);
  params.q = device.input(host.q);
  params.k = device.input(host.k);
  params.v = device.input(host.v);
  params.out = device.input(host.out);
  params.lse = device.lse_input();
  params.dq = device.output(host.dq);
  params.dk = device.output(host.dk);
  params.dv = device.output(host.dv);
  params.softmax_scale = scale;
  params.deterministic = deterministic;
  return params;
}

void run_on_device(const dualkv::Layout& layout, dualkv::ForwardParams params) {
  run_with_workspace(layout, params, dualkv::forward_workspace_bytes(layout, params), &dualkv::forward);
}

void run_on_device(const dualkv::Layout& layout, dualkv::BackwardParams params) {
  run_with_workspace(layout, params, dualkv::backward_workspace_bytes(layout, params), &dualkv::backward);
}

oracle::ForwardResult cpu_fp64_forward(const dualkv::Layout& layout, const oracle::DenseTensor& q,
                                       const oracle::DenseTensor& k, const oracle::DenseTensor& v, float scale) {
  const StridedTensor q32 = float32_copy(q), k32 = float32_copy(k), v32 = float32_copy(v);
  StridedTensor out = contiguous(dualkv::DType::kFloat32, q.tokens, q.heads, q.dim);
  LseBuffer lse(q.heads, q.tokens, q.tokens);
  dualkv::ForwardParams params;
  params.q = q32.input();
  params.k = k32.input();
  params.v = v32.input();
  params.out = out.output();
  params.lse = lse.output();
  params.softmax_scale = scale;
  params.options = cpu_fp64_options();
  dualkv::forward(layout, params);
  return oracle::ForwardResult{to_dense(out), lse.to_dense()};
}

oracle::Gradients cpu_fp64_backward(const dualkv::Layout& layout, const oracle::DenseTensor& q,
                                    const oracle::DenseTensor& k, const oracle::DenseTensor& v,
                                    const oracle::DenseTensor& out, const oracle::DenseTensor& lse,
                                    const oracle::DenseTensor& dout, float scale) {
  const StridedTensor q32 = float32_copy(q), k32 = float32_copy(k), v32 = float32_copy(v);
  const StridedTensor out32 = float32_copy(out), dout32 = float32_copy(dout);
  const LseBuffer lse32 = lse_copy(lse);
  StridedTensor dq = contiguous(dualkv::DType::kFloat32, q.tokens, q.heads, q.dim);
  StridedTensor dk = contiguous(dualkv::DType::kFloat32, k.tokens, k.heads, k.dim);
  StridedTensor dv = contiguous(dualkv::DType::kFloat32, v.tokens, v.heads, v.dim);
  dualkv::BackwardParams params;
  params.dout = dout32.input();
  params.q = q32.input();
  params.k = k32.input();
  params.v = v32.input();
  params.out = out32.input();
  params.lse = lse32.input();
  params.dq = dq.output();
  params.dk = dk.output();
  params.dv = dv.output();
  params.softmax_scale = scale;
  params.options = cpu_fp64_options();
  dualkv::backward(layout, params);
  return oracle::Gradients{to_dense(dq), to_dense(dk), to_dense(dv)};
}

cuda_reference::OperandRounding operand_rounding(dualkv::DType dtype) {
  switch (dtype) {
    case dualkv::DType::kFloat16:
      return cuda_reference::OperandRounding::kFloat16;
    case dualkv::DType::kBFloat16:
      return cuda_reference::OperandRounding::kBFloat16;
    default:
      return cuda_reference::OperandRounding::kNone;
  }
}

oracle::DenseTensor rounded_to(const oracle::DenseTensor& tensor, dualkv::DType dtype) {
  Storage storage(dtype, static_cast<int64_t>(tensor.values.size()));
  oracle::DenseTensor rounded = tensor;
  for (size_t e = 0; e < tensor.values.size(); ++e) {
    storage.write(static_cast<int64_t>(e), tensor.values[e]);
    rounded.values[e] = storage.read(static_cast<int64_t>(e));
  }
  return rounded;
}

dualkv::Layout layout_of(const AttentionCase& problem) {
  if (problem.tree.lengths.empty()) return make_layout(problem.batch);
  return dualkv::Layout::from_tree(problem.tree.parents, problem.tree.lengths);
}

std::vector<oracle::CopiedSequence> reference_sequences_of(const AttentionCase& problem) {
  if (problem.tree.lengths.empty()) return reference_sequences(problem.batch);
  return oracle::path_sequences(problem.tree);
}

}  // namespace dualkv_test
