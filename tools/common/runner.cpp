#include "common/runner.h"

#include <algorithm>

#include "common/device_buffer.h"

namespace dualkv::tools {
namespace {

template <typename Pointer>
TokenHeadTensor<Pointer> view(Pointer data, DType dtype, Device device, int64_t tokens, int64_t heads, int64_t dim) {
  return {data, dtype, device, tokens, heads, dim, heads * dim, dim};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

AttentionResult run_attention(const Layout& layout, const AttentionInputs& in, Device device, RunSettings settings) {
  const int64_t t = layout.total_tokens();
  const size_t q_elements = t * in.heads * in.head_dim;
  const size_t kv_elements = t * in.kv_heads * in.head_dim;
  DeviceBuffer q(device, in.dtype, q_elements), k(device, in.dtype, kv_elements), v(device, in.dtype, kv_elements);
  DeviceBuffer dout(device, in.dtype, q_elements), out(device, in.dtype, q_elements);
  DeviceBuffer lse(device, DType::kFloat32, in.heads * t);
  DeviceBuffer dq(device, in.dtype, q_elements), dk(device, in.dtype, kv_elements), dv(device, in.dtype, kv_elements);
  q.upload(in.q);
  k.upload(in.k);
  v.upload(in.v);
  dout.upload(in.dout);

  const float scale = default_softmax_scale(in.head_dim);
  ForwardParams fwd;
  fwd.q = view<const void*>(q.data(), in.dtype, device, t, in.heads, in.head_dim);
  fwd.k = view<const void*>(k.data(), in.dtype, device, t, in.kv_heads, in.head_dim);
  fwd.v = view<const void*>(v.data(), in.dtype, device, t, in.kv_heads, in.head_dim);
  fwd.out = view<void*>(out.data(), in.dtype, device, t, in.heads, in.head_dim);
  fwd.lse = {static_cast<float*>(lse.data()), device, in.heads, t, t};
  fwd.softmax_scale = scale;

  BackwardParams bwd;
  bwd.dout = view<const void*>(dout.data(), in.dtype, device, t, in.heads, in.head_dim);
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.out = view<const void*>(out.data(), in.dtype, device, t, in.heads, in.head_dim);
  bwd.lse = {static_cast<const float*>(lse.data()), device, in.heads, t, t};
  bwd.dq = view<void*>(dq.data(), in.dtype, device, t, in.heads, in.head_dim);
  bwd.dk = view<void*>(dk.data(), in.dtype, device, t, in.kv_heads, in.head_dim);
  bwd.dv = view<void*>(dv.data(), in.dtype, device, t, in.kv_heads, in.head_dim);
  bwd.softmax_scale = scale;
  fwd.options.cpu_threads = settings.cpu_threads;
  bwd.options.cpu_threads = settings.cpu_threads;

  Workspace fwd_workspace(device, forward_workspace_bytes(layout, fwd));
  fwd.options.workspace = fwd_workspace.data;
  fwd.options.workspace_bytes = fwd_workspace.bytes;
  Workspace bwd_workspace(device, backward_workspace_bytes(layout, bwd));
  bwd.options.workspace = bwd_workspace.data;
  bwd.options.workspace_bytes = bwd_workspace.bytes;

  RegionTimer timer(device);
  std::vector<double> forward_ms, backward_ms;
  for (int run = 0; run < settings.warmups + settings.repeats; ++run) {
    out.poison();
    lse.poison();
    dq.poison();
    dk.poison();
    dv.poison();
    timer.start();
    forward(layout, fwd);
    const double f = timer.stop_ms();
    timer.start();
    backward(layout, bwd);
    const double b = timer.stop_ms();
    if (run >= settings.warmups) {
      forward_ms.push_back(f);
      backward_ms.push_back(b);
    }
  }
  return {out.download(), lse.download(),     dq.download(),      dk.download(),
          dv.download(),  median(forward_ms), median(backward_ms)};
}

}  // namespace dualkv::tools
