// The benchmark's shapes (docs/benchmarks.md: Qwen3-8B attention, one prompt group of N
// responses), selectable by name, and the FLOP counts reported against them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dualkv/dualkv.h"

namespace dualkv::bench {

struct BenchConfig {
  int64_t responses = 0;                  // N
  int64_t prompt = 0;                     // P
  int64_t response = 2048;                // R of every response, unless response_lengths is set
  std::vector<int64_t> response_lengths;  // ragged responses (N of them), e.g. a training step's
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t head_dim = 128;

  // "N28_P4096"; ragged: "N32_P8192_R308-2038" (shortest and longest); "_H24k4" appended at heads
  // other than Qwen3-8B's 32 and 8, then "_d64" at a head_dim other than its 128.
  std::string name() const;
  Layout layout() const;
};

// The five (N, P) pairs of the benchmark tables.
std::vector<BenchConfig> design_configs();

// "all", or a comma-separated list of items at the benchmark's H, Hk, d: "NxP" (N responses of the benchmark's
// R, e.g. "28x4096"), or "P:R1/R2/.../RN" (one prompt and N ragged responses of the given lengths,
// e.g. a training step's micro-batch).
std::vector<BenchConfig> parse_configs(const std::string& text);

// "fp16", "bf16" or "both".
std::vector<DType> parse_dtypes(const std::string& text);

// Useful FLOPs on the deduplicated pairs: forward 4 d H pairs, backward 2.5 times that.
double forward_flops(const BenchConfig& config);
double backward_flops(const BenchConfig& config);

}  // namespace dualkv::bench
