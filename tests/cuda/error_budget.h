// The GPU suite's acceptance rules.
//
// Tolerance: a kernel result passes iff its error against a reference is at most twice the error
// that plain attention makes when it computes the same thing in the same low precision, plus a
// tiny absolute floor:
//     max|kernel - ref| <= 2 * max|baseline - ref| + 64 * 2^-23 * max|ref|
// where `baseline` is the N-copy GPU reference run with the kernel's roundings (inputs in the
// dtype, P and dS rounded to the dtype before their matrix products, fp32 accumulation, results
// rounded to the dtype) and `ref` is an fp64 or fp32 evaluation on the same dtype-exact inputs.
// The floor (64 fp32 ulps of the largest reference value) only matters where the baseline is
// exact, e.g. a single visible key. NaN or infinity in the kernel's result never passes.
#pragma once

#include <gtest/gtest.h>

#include "attention_problem.h"

namespace dualkv_test {

::testing::AssertionResult within_error_budget(const oracle::DenseTensor& kernel, const oracle::DenseTensor& baseline,
                                               const oracle::DenseTensor& reference);

// Every element of the view was written (no poison pattern left).
::testing::AssertionResult fully_written(const StridedTensor& view);
::testing::AssertionResult fully_written(const LseBuffer& lse);

// No element of any storage outside the views, nor of the LSE padding, lost its poison.
::testing::AssertionResult nothing_written_outside_views(const HostTensors& host);

// Bit-for-bit equality of two storages (deterministic reruns).
::testing::AssertionResult bitwise_equal(const Storage& first, const Storage& second);

// Exact equality of values, NaN matching NaN (inputs that must come back unmodified).
::testing::AssertionResult identical(const oracle::DenseTensor& actual, const oracle::DenseTensor& expected);

}  // namespace dualkv_test
