// Oracle (b): ordinary causal attention on the explicitly copied N-copy layout.
//
// Each response i of group g becomes its own sequence [prompt_g; response_i] (the prompt rows are
// physically copied), and the prompt alone is one more sequence. Results map back to the packed
// layout: response rows take their copy's output, prompt rows take the prompt-alone output; in
// the backward pass the prompt rows of each copy carry no output gradient (their outputs are
// the prompt-alone ones), so prompt dK/dV is the prompt's own gradient plus the SUM over the N
// copies, exactly the quantity the deduplicated kernels must produce.
#pragma once

#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"

namespace dualkv_test::oracle {

// One sequence: the packed rows it copies, in order; rows before `scored_from` belong to the
// copied prompt whose outputs are taken from elsewhere.
struct CopiedSequence {
  std::vector<int64_t> packed_rows;
  int64_t scored_from = 0;
};

// The N-copy layout proper: [prompt_g; response_i] for every response, in packed order.
std::vector<CopiedSequence> ncopy_sequences(const BatchSpec& batch);

// Causal attention over each sequence alone, mapped back to the packed rows: a sequence's rows from
// scored_from on take its outputs (each packed row must be scored by exactly one sequence); its
// earlier rows carry no output gradient, and every row's dK/dV sum over the sequences holding it.
ForwardResult sequences_forward(const std::vector<CopiedSequence>& sequences, const DenseTensor& q,
                                const DenseTensor& k, const DenseTensor& v, double scale);
Gradients sequences_backward(const std::vector<CopiedSequence>& sequences, const DenseTensor& q, const DenseTensor& k,
                             const DenseTensor& v, const DenseTensor& dout, double scale);

ForwardResult ncopy_forward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                            double scale);

Gradients ncopy_backward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                         const DenseTensor& dout, double scale);

}  // namespace dualkv_test::oracle
