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

// Opt-in shared memory per block of sm_86/sm_89 GPUs (A10, L40, RTX 30/40) and of an A100. Passed
// as max_shared_memory_per_block, each makes any larger GPU run the kernels those GPUs get.
constexpr size_t kSm86SharedMemoryPerBlock = 101376;
constexpr size_t kA100SharedMemoryPerBlock = 166912;

// The ExecutionOptions of every run: the kernel family and the shared memory per block (0 = the
// device's limit).
struct KernelChoice {
  dualkv::KernelFamily family = dualkv::KernelFamily::kAuto;
  size_t max_shared_memory_per_block = 0;
};

// How a check draws its inputs: q, k, v and dout uniform in [-1, 1), then
enum class InputPattern {
  kUniform,  // nothing more;
  // NaN in q, k and v of every odd-numbered segment. Rows that see such a segment must come out NaN
  // (propagation); every other row must be unaffected and within budget (a kernel that reads a
  // neighbouring segment's rows into a result, even multiplied by zero, fails);
  kNanInOddSegments,
  // NaN in v alone of every odd-numbered segment: the same rule for out (the rows that see such a
  // segment are NaN, every other row within budget) while every LSE stays finite (a kernel whose
  // tile held rows of two responses would have to keep each one's V out of the other's rows, as
  // 0 x NaN is NaN, and still make its own rows NaN);
  kNanValuesInOddSegments,
  // the j-th key of every segment scaled by 1 + j / 32, so that a row's maximum score jumps by more
  // than 2^8 (in exp2 units) at later key blocks of its walk and the online softmax must rescale O
  // mid-walk (the Hopper forward's lazy maximum moves only then; uniform inputs never make it).
  kGrowingKeys,
};

void check_forward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim, const KernelChoice& choice = {},
                   InputPattern pattern = InputPattern::kUniform);

// Both backward modes; the deterministic one is also run twice and compared bit for bit.
// With kNanInOddSegments, gradients that depend on a NaN input must be NaN, every other one
// unaffected and within budget.
void check_backward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim,
                    const KernelChoice& choice = {}, InputPattern pattern = InputPattern::kUniform);

}  // namespace dualkv_test
