// The suite's N-copy reference: the packed batch physically copied into plain causal sequences
// (two-level batches: each prompt alone, then [prompt_g; response_i] for every response, built by
// the CPU suite's oracle::ncopy_sequences; trees: every root-to-leaf path, oracle::path_sequences),
// run through the fp32 GPU reference, and mapped back to packed rows.
//
// Each packed row takes the results of the one sequence that scores it; in the backward pass the
// other copies of a row carry no output gradient, so a shared key's dK/dV is its own gradient plus
// the SUM over the copies (docs/decisions.md, "The layout").
#pragma once

#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"
#include "cpu/oracle_ncopy.h"
#include "reference_attention.h"

namespace dualkv_test {

// Every prompt alone (its rows are all scored), then the N-copy sequences.
std::vector<oracle::CopiedSequence> reference_sequences(const BatchSpec& batch);

oracle::ForwardResult ncopy_reference_forward(const std::vector<oracle::CopiedSequence>& sequences,
                                              const oracle::DenseTensor& q, const oracle::DenseTensor& k,
                                              const oracle::DenseTensor& v, float scale,
                                              cuda_reference::OperandRounding rounding);

// out (T, H, d) and lse (T, H, 1) are inputs, the values the library's backward also receives.
oracle::Gradients ncopy_reference_backward(const std::vector<oracle::CopiedSequence>& sequences,
                                           const oracle::DenseTensor& q, const oracle::DenseTensor& k,
                                           const oracle::DenseTensor& v, const oracle::DenseTensor& out,
                                           const oracle::DenseTensor& lse, const oracle::DenseTensor& dout, float scale,
                                           cuda_reference::OperandRounding rounding);

}  // namespace dualkv_test
