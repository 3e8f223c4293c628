// Measures one benchmark configuration in one dtype: peak device memory of one forward +
// backward, then median forward and backward times over rotating input sets.
#pragma once

#include <cstddef>
#include <string>

#include "bench_configs.h"

namespace dualkv::bench {

struct RunOptions {
  int warmups = 2;
  int repeats = 10;
  size_t max_shared_memory_per_block = 0;            // ExecutionOptions' cap of every call; 0 = the device's
  KernelFamily kernel_family = KernelFamily::kAuto;  // of both passes
  bool deterministic = false;                        // BackwardParams::deterministic of every backward
};

// The --kernel-family names: "auto", "portable", "hopper".
KernelFamily parse_kernel_family(const std::string& name);
const char* kernel_family_name(KernelFamily family);

struct BenchResult {
  BenchConfig config;
  DType dtype = DType::kFloat16;
  std::string failure;  // empty on success; "OOM" when the shape does not fit
  int repeats = 0;
  int input_sets = 0;       // distinct input sets the timed runs rotate over
  double forward_ms = 0.0;  // medians
  double backward_ms = 0.0;
  double forward_tflops = 0.0;
  double backward_tflops = 0.0;
  size_t peak_bytes = 0;    // process high-water mark around one forward + backward
  size_t tensor_bytes = 0;  // Q, K, V, O, dO, dQ, dK, dV themselves
};

BenchResult run_config(const BenchConfig& config, DType dtype, const RunOptions& options);

}  // namespace dualkv::bench
