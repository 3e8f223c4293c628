// The suite's N-copy reference: the packed batch physically copied into plain causal sequences
// (each prompt alone, then [prompt_g; response_i] for every response, built by the CPU suite's
// oracle::ncopy_sequences), run through the fp32 GPU reference, and mapped back to packed rows.
//
// Response rows take their copy's results and prompt rows the prompt-alone ones; in the backward
// pass the copied prompt rows carry no output gradient, so a prompt key's dK/dV is its own
// gradient plus the SUM over the N copies (docs/decisions.md, "The layout").
#pragma once

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"
#include "reference_attention.h"

namespace dualkv_test {

oracle::ForwardResult ncopy_reference_forward(const BatchSpec& batch, const oracle::DenseTensor& q,
                                              const oracle::DenseTensor& k, const oracle::DenseTensor& v, float scale,
                                              cuda_reference::OperandRounding rounding);

// out (T, H, d) and lse (T, H, 1) are inputs, the values the library's backward also receives.
oracle::Gradients ncopy_reference_backward(const BatchSpec& batch, const oracle::DenseTensor& q,
                                           const oracle::DenseTensor& k, const oracle::DenseTensor& v,
                                           const oracle::DenseTensor& out, const oracle::DenseTensor& lse,
                                           const oracle::DenseTensor& dout, float scale,
                                           cuda_reference::OperandRounding rounding);

}  // namespace dualkv_test
