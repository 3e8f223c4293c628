// Uses the installed package: attention over one prompt token and two one-token responses on the
// CPU, against the softmax written out here (response i sees the prompt and itself, not the other
// response). Exit status 0 when they agree.
#include <dualkv/dualkv.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const dualkv::Layout layout = dualkv::Layout::from_lengths({1}, {{1, 1}});
  constexpr int kTokens = 3, kDim = 2;
  const std::vector<float> q = {0.5f, -1.0f, 1.5f, 0.25f, -0.75f, 2.0f};
  const std::vector<float> k = {1.0f, 0.5f, -0.5f, 1.0f, 0.25f, -1.5f};
  const std::vector<float> v = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  std::vector<float> out(kTokens * kDim), lse(kTokens);

  const dualkv::Device cpu{dualkv::DeviceKind::kCpu, 0};
  dualkv::ForwardParams params;
  params.q = {q.data(), dualkv::DType::kFloat32, cpu, kTokens, 1, kDim, kDim, kDim};
  params.k = {k.data(), dualkv::DType::kFloat32, cpu, kTokens, 1, kDim, kDim, kDim};
  params.v = {v.data(), dualkv::DType::kFloat32, cpu, kTokens, 1, kDim, kDim, kDim};
  params.out = {out.data(), dualkv::DType::kFloat32, cpu, kTokens, 1, kDim, kDim, kDim};
  params.lse = {lse.data(), cpu, 1, kTokens, kTokens};
  params.softmax_scale = dualkv::default_softmax_scale(kDim);
  dualkv::forward(layout, params);

  const std::vector<std::vector<int>> visible = {{0}, {0, 1}, {0, 2}};
  double worst = 0.0;
  for (int t = 0; t < kTokens; ++t) {
    double total = 0.0, o[kDim] = {0.0, 0.0};
    for (int key : visible[t]) {
      const double weight =
          std::exp(params.softmax_scale * (q[t * kDim] * k[key * kDim] + q[t * kDim + 1] * k[key * kDim + 1]));
      total += weight;
      for (int c = 0; c < kDim; ++c) o[c] += weight * v[key * kDim + c];
    }
    for (int c = 0; c < kDim; ++c) worst = std::fmax(worst, std::fabs(o[c] / total - out[t * kDim + c]));
  }
  std::printf("installed dualkv: max abs error %.2e against the written-out softmax\n", worst);
  return worst < 1e-5 ? 0 : 1;
}
