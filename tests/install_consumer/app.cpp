// One prompt of 6 tokens and three responses of 4, 3 and 1 tokens, packed as
// [prompt | response 0 | response 1 | response 2]; 4 query heads reading 2 KV heads of dimension 8;
// float32 on the CPU. Forward, then backward; exit status 0 when the log-sum-exp checks out.
#include <dualkv/dualkv.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const dualkv::Layout layout = dualkv::Layout::from_lengths({6}, {{4, 3, 1}});  // prompts, responses per prompt
  const int64_t T = layout.total_tokens(), H = 4, Hk = 2, d = 8;
  const dualkv::Device cpu{dualkv::DeviceKind::kCpu, 0};
  const dualkv::DType f32 = dualkv::DType::kFloat32;

  std::vector<float> q(T * H * d), k(T * Hk * d), v(T * Hk * d), dout(T * H * d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = dout[i] = std::sin(0.1f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = v[i] = std::cos(0.2f * static_cast<float>(i));
  std::vector<float> out(T * H * d), lse(H * T), dq(T * H * d), dk(T * Hk * d), dv(T * Hk * d);

  // Tensors are (tokens, heads, head_dim) views of the caller's memory: {data, dtype, device,
  // tokens, heads, head_dim, token_stride, head_stride}, strides in elements, head_dim contiguous.
  dualkv::ForwardParams fwd;
  fwd.q = {q.data(), f32, cpu, T, H, d, H * d, d};
  fwd.k = {k.data(), f32, cpu, T, Hk, d, Hk * d, d};
  fwd.v = {v.data(), f32, cpu, T, Hk, d, Hk * d, d};
  fwd.out = {out.data(), f32, cpu, T, H, d, H * d, d};
  // The softmax's log-sum-exp, an output the backward reads: (heads, tokens) float32, tokens
  // contiguous, {data, device, heads, tokens, head_stride}. Entry (h, t) is the natural log of
  // sum_k exp(scale * q.k) over the keys query t of head h sees.
  fwd.lse = {lse.data(), cpu, H, T, T};
  fwd.softmax_scale = dualkv::default_softmax_scale(d);  // 1 / sqrt(d)
  dualkv::forward(layout, fwd);  // throws dualkv::Error naming the argument and the rule on bad input

  dualkv::BackwardParams bwd;
  bwd.dout = {dout.data(), f32, cpu, T, H, d, H * d, d};
  bwd.q = fwd.q;
  bwd.k = fwd.k;
  bwd.v = fwd.v;
  bwd.out = {out.data(), f32, cpu, T, H, d, H * d, d};
  bwd.lse = {lse.data(), cpu, H, T, T};
  bwd.dq = {dq.data(), f32, cpu, T, H, d, H * d, d};
  bwd.dk = {dk.data(), f32, cpu, T, Hk, d, Hk * d, d};  // a prompt key's gradient sums every response's
  bwd.dv = {dv.data(), f32, cpu, T, Hk, d, Hk * d, d};
  bwd.softmax_scale = fwd.softmax_scale;
  dualkv::backward(layout, bwd);

  // Token 0 sees only itself, so its log-sum-exp is scale * q.k with its own key (head 0 reads KV head 0).
  double dot = 0.0;
  for (int64_t c = 0; c < d; ++c) dot += q[c] * k[c];
  const double expected = fwd.softmax_scale * dot;
  std::printf("%lld packed tokens; lse of token 0, head 0: %.6f (expected %.6f)\n", static_cast<long long>(T), lse[0],
              expected);
  return std::fabs(lse[0] - expected) < 1e-5 ? 0 : 1;
}
