#include "ncopy_reference.h"

#include <cstddef>
#include <vector>

#include "cpu/oracle_ncopy.h"

namespace dualkv_test {
namespace {

using oracle::CopiedSequence;
using oracle::DenseTensor;

// The copied layout: which packed row each copied row reads, and whether its results count.
struct CopiedRows {
  std::vector<int32_t> cu_seqlens{0};
  std::vector<int64_t> packed_row;
  std::vector<bool> scored;
};

CopiedRows copied_rows(const std::vector<CopiedSequence>& sequences) {
  CopiedRows rows;
  for (const CopiedSequence& sequence : sequences) {
    for (size_t r = 0; r < sequence.packed_rows.size(); ++r) {
      rows.packed_row.push_back(sequence.packed_rows[r]);
      rows.scored.push_back(static_cast<int64_t>(r) >= sequence.scored_from);
    }
    rows.cu_seqlens.push_back(static_cast<int32_t>(rows.packed_row.size()));
  }
  return rows;
}

// (copied rows, heads, dim) fp32, row-major; rows that are not scored get zero if asked.
std::vector<float> gather(const DenseTensor& packed, const CopiedRows& rows, bool zero_unscored) {
  const int64_t width = packed.heads * packed.dim;
  std::vector<float> copied(rows.packed_row.size() * width, 0.0f);
  for (size_t r = 0; r < rows.packed_row.size(); ++r) {
    if (zero_unscored && !rows.scored[r]) continue;
    for (int64_t e = 0; e < width; ++e)
      copied[r * width + e] = static_cast<float>(packed.values[rows.packed_row[r] * width + e]);
  }
  return copied;
}

// The LSE (T, H, 1) as the reference wants it: (heads, copied rows).
std::vector<float> gather_lse(const DenseTensor& lse, const CopiedRows& rows) {
  const auto count = static_cast<int64_t>(rows.packed_row.size());
  std::vector<float> copied(lse.heads * count);
  for (int64_t h = 0; h < lse.heads; ++h) {
    for (int64_t r = 0; r < count; ++r) copied[h * count + r] = static_cast<float>(lse.at(rows.packed_row[r], h, 0));
  }
  return copied;
}

// Scored rows overwrite their packed row (each packed row has exactly one scored copy); with
// `sum_all`, every copied row adds into its packed row instead (gradients of copied keys).
DenseTensor scatter(const std::vector<float>& copied, const CopiedRows& rows, int64_t tokens, int64_t heads,
                    int64_t dim, bool sum_all) {
  DenseTensor packed(tokens, heads, dim);
  const int64_t width = heads * dim;
  for (size_t r = 0; r < rows.packed_row.size(); ++r) {
    if (!sum_all && !rows.scored[r]) continue;
    for (int64_t e = 0; e < width; ++e) packed.values[rows.packed_row[r] * width + e] += copied[r * width + e];
  }
  return packed;
}

cuda_reference::Shape shape_of(const DenseTensor& q, const DenseTensor& k, float scale) {
  return cuda_reference::Shape{q.heads, k.heads, q.dim, scale};
}

}  // namespace

std::vector<CopiedSequence> reference_sequences(const BatchSpec& batch) {
  std::vector<CopiedSequence> sequences;
  for (const GroupTokens& group : packed_token_ranges(batch)) {
    CopiedSequence prompt;
    for (int64_t t = 0; t < group.prompt_length; ++t) prompt.packed_rows.push_back(group.prompt_begin + t);
    sequences.push_back(prompt);
  }
  for (const CopiedSequence& copy : oracle::ncopy_sequences(batch)) sequences.push_back(copy);
  return sequences;
}

oracle::ForwardResult ncopy_reference_forward(const std::vector<CopiedSequence>& sequences, const DenseTensor& q,
                                              const DenseTensor& k, const DenseTensor& v, float scale,
                                              cuda_reference::OperandRounding rounding) {
  const CopiedRows rows = copied_rows(sequences);
  const cuda_reference::ForwardResult copied =
      cuda_reference::causal_forward(rows.cu_seqlens, shape_of(q, k, scale), gather(q, rows, false),
                                     gather(k, rows, false), gather(v, rows, false), rounding);
  // The reference's LSE is (heads, rows); as a (rows, heads) array it scatters like any tensor.
  const auto count = static_cast<int64_t>(rows.packed_row.size());
  std::vector<float> lse_by_row(copied.lse.size());
  for (int64_t h = 0; h < q.heads; ++h) {
    for (int64_t r = 0; r < count; ++r) lse_by_row[r * q.heads + h] = copied.lse[h * count + r];
  }
  return oracle::ForwardResult{scatter(copied.out, rows, q.tokens, q.heads, q.dim, false),
                               scatter(lse_by_row, rows, q.tokens, q.heads, 1, false)};
}

oracle::Gradients ncopy_reference_backward(const std::vector<CopiedSequence>& sequences, const DenseTensor& q,
                                           const DenseTensor& k, const DenseTensor& v, const DenseTensor& out,
                                           const DenseTensor& lse, const DenseTensor& dout, float scale,
                                           cuda_reference::OperandRounding rounding) {
  const CopiedRows rows = copied_rows(sequences);
  const cuda_reference::Gradients copied = cuda_reference::causal_backward(
      rows.cu_seqlens, shape_of(q, k, scale), gather(q, rows, false), gather(k, rows, false), gather(v, rows, false),
      gather(out, rows, false), gather_lse(lse, rows), gather(dout, rows, true), rounding);
  return oracle::Gradients{scatter(copied.dq, rows, q.tokens, q.heads, q.dim, false),
                           scatter(copied.dk, rows, k.tokens, k.heads, k.dim, true),
                           scatter(copied.dv, rows, v.tokens, v.heads, v.dim, true)};
}

}  // namespace dualkv_test
