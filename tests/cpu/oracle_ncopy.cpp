#include "cpu/oracle_ncopy.h"

#include <cstddef>

namespace dualkv_test::oracle {
namespace {

DenseTensor gather_rows(const DenseTensor& packed, const std::vector<int64_t>& rows) {
  DenseTensor copy(static_cast<int64_t>(rows.size()), packed.heads, packed.dim);
  for (int64_t r = 0; r < copy.tokens; ++r) {
    for (int64_t h = 0; h < packed.heads; ++h) {
      for (int64_t i = 0; i < packed.dim; ++i) copy.at(r, h, i) = packed.at(rows[r], h, i);
    }
  }
  return copy;
}

// Writes (or, with accumulate, adds) rows [first, end) of `sequence` into their packed rows.
void scatter_rows(const DenseTensor& sequence, const std::vector<int64_t>& rows, int64_t first, bool accumulate,
                  DenseTensor& packed) {
  for (int64_t r = first; r < sequence.tokens; ++r) {
    for (int64_t h = 0; h < sequence.heads; ++h) {
      for (int64_t i = 0; i < sequence.dim; ++i) {
        double& target = packed.at(rows[r], h, i);
        target = (accumulate ? target : 0.0) + sequence.at(r, h, i);
      }
    }
  }
}

// The prompt-alone sequences followed by the N-copy sequences.
std::vector<CopiedSequence> all_sequences(const BatchSpec& batch) {
  std::vector<CopiedSequence> sequences;
  for (const GroupTokens& group : packed_token_ranges(batch)) {
    CopiedSequence prompt;
    for (int64_t t = 0; t < group.prompt_length; ++t) {
      prompt.packed_rows.push_back(group.prompt_begin + t);
    }
    sequences.push_back(prompt);
  }
  for (const CopiedSequence& copy : ncopy_sequences(batch)) sequences.push_back(copy);
  return sequences;
}

}  // namespace

std::vector<CopiedSequence> ncopy_sequences(const BatchSpec& batch) {
  std::vector<CopiedSequence> sequences;
  for (const GroupTokens& group : packed_token_ranges(batch)) {
    for (std::size_t i = 0; i < group.response_begins.size(); ++i) {
      CopiedSequence copy;
      for (int64_t t = 0; t < group.prompt_length; ++t) {
        copy.packed_rows.push_back(group.prompt_begin + t);
      }
      copy.scored_from = group.prompt_length;
      for (int64_t t = 0; t < group.response_lengths[i]; ++t) {
        copy.packed_rows.push_back(group.response_begins[i] + t);
      }
      sequences.push_back(copy);
    }
  }
  return sequences;
}

ForwardResult sequences_forward(const std::vector<CopiedSequence>& sequences, const DenseTensor& q,
                                const DenseTensor& k, const DenseTensor& v, double scale) {
  ForwardResult packed{DenseTensor(q.tokens, q.heads, q.dim), DenseTensor(q.tokens, q.heads, 1)};
  for (const CopiedSequence& sequence : sequences) {
    const auto& rows = sequence.packed_rows;
    const ForwardResult result =
        masked_attention_forward(gather_rows(q, rows), gather_rows(k, rows), gather_rows(v, rows),
                                 KeyMask::causal(static_cast<int64_t>(rows.size())), scale);
    scatter_rows(result.out, rows, sequence.scored_from, false, packed.out);
    scatter_rows(result.lse, rows, sequence.scored_from, false, packed.lse);
  }
  return packed;
}

Gradients sequences_backward(const std::vector<CopiedSequence>& sequences, const DenseTensor& q, const DenseTensor& k,
                             const DenseTensor& v, const DenseTensor& dout, double scale) {
  Gradients packed{DenseTensor(q.tokens, q.heads, q.dim), DenseTensor(k.tokens, k.heads, k.dim),
                   DenseTensor(v.tokens, v.heads, v.dim)};
  for (const CopiedSequence& sequence : sequences) {
    const auto& rows = sequence.packed_rows;
    DenseTensor sequence_dout = gather_rows(dout, rows);
    for (int64_t r = 0; r < sequence.scored_from; ++r) {
      for (int64_t h = 0; h < dout.heads; ++h) {
        for (int64_t i = 0; i < dout.dim; ++i) sequence_dout.at(r, h, i) = 0.0;
      }
    }
    const Gradients grads =
        masked_attention_backward(gather_rows(q, rows), gather_rows(k, rows), gather_rows(v, rows), sequence_dout,
                                  KeyMask::causal(static_cast<int64_t>(rows.size())), scale);
    scatter_rows(grads.dq, rows, sequence.scored_from, false, packed.dq);
    scatter_rows(grads.dk, rows, 0, true, packed.dk);
    scatter_rows(grads.dv, rows, 0, true, packed.dv);
  }
  return packed;
}

ForwardResult ncopy_forward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                            double scale) {
  return sequences_forward(all_sequences(batch), q, k, v, scale);
}

Gradients ncopy_backward(const BatchSpec& batch, const DenseTensor& q, const DenseTensor& k, const DenseTensor& v,
                         const DenseTensor& dout, double scale) {
  return sequences_backward(all_sequences(batch), q, k, v, dout, scale);
}

}  // namespace dualkv_test::oracle
