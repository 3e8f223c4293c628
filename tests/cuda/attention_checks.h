// The forward and backward checks every GPU test runs on one problem (shape grid, sanitizer).
//
// Each draws fresh inputs (seeded by the test's name), poisons every output before each run,
// runs the library on the device, and checks: every output element written, nothing written
// outside the views, inputs unmodified, and each result within the error budget
// (error_budget.h) against both the CPU path in fp64 and the N-copy fp32 GPU reference.
#pragma once

#include <cstdint>

#include "attention_problem.h"

namespace dualkv_test {

void check_forward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim);

// Both backward modes; the deterministic one is also run twice and compared bit for bit.
void check_backward(const AttentionCase& problem, dualkv::DType dtype, int64_t head_dim);

}  // namespace dualkv_test
