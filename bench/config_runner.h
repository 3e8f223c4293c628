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
  double forward_ms = 0.0;  // medians of forward, backward, forward, backward, ...
  double backward_ms = 0.0;
  double forward_tflops = 0.0;
  double backward_tflops = 0.0;
  // Median of forwards run back to back: the forward alone, at the clock its own power draw sets.
  // In the alternating loop the forward inherits the clock the backward before it left (on an
  // H100 the same forward measured 601-715 TFLOP/s depending on which backward kernel preceded it).
  double forward_alone_ms = 0.0;
  double forward_alone_tflops = 0.0;
  size_t peak_bytes = 0;    // process high-water mark around one forward + backward
  size_t tensor_bytes = 0;  // Q, K, V, O, dO, dQ, dK, dV themselves
};

BenchResult run_config(const BenchConfig& config, DType dtype, const RunOptions& options);

}  // namespace dualkv::bench
