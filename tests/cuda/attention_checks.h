// The forward and backward checks every GPU test runs on one problem (shape grid, sanitizer).
//
// Each draws fresh inputs (seeded by the test's name), poisons every output before each run,
// runs the library on the device, and checks: every output element written, nothing written
// outside the views, inputs unmodified, and each result within the error budget
// (error_budget.h) against both the CPU path in fp64 and the N-copy fp32 GPU reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention_problem.h"

namespace dualkv_test {

// Opt-in shared memory per block of sm_86/sm_89 GPUs (A10, L40, RTX 30/40). Passed as
// max_shared_memory_per_block, it makes any larger GPU run the kernels those GPUs get.
constexpr size_t kSm86SharedMemoryPerBlock = 101376;

// max_shared_memory_per_block: ExecutionOptions::max_shared_memory_per_block of every run (0 = the
// device's limit).
void check_forward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim,
                   size_t max_shared_memory_per_block = 0);

// Both backward modes; the deterministic one is also run twice and compared bit for bit.
void check_backward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim,
                    size_t max_shared_memory_per_block = 0);

}  // namespace dualkv_test
