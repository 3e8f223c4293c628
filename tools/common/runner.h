// Runs dualkv forward and backward on one device from host inputs, with timing.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/dualkv.h"

namespace dualkv::tools {

struct AttentionInputs {
  const std::vector<float>& q;
  const std::vector<float>& k;
  const std::vector<float>& v;
  const std::vector<float>& dout;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  DType dtype;
};

struct RunSettings {
  int warmups = 0;
  int repeats = 1;      // the reported time is the median of these
  int cpu_threads = 0;  // CPU path only; 0 = all cores
};

struct AttentionResult {
  std::vector<float> out, lse, dq, dk, dv;  // contiguous (T, H, d) / (H, T)
  double forward_ms = 0.0;                  // median
  double backward_ms = 0.0;                 // median
};

// Outputs are poisoned (NaN) before every run, so an unwritten element shows up as NaN.
AttentionResult run_attention(const Layout& layout, const AttentionInputs& inputs, Device device, RunSettings settings);

}  // namespace dualkv::tools
