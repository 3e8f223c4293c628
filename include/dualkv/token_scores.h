// Token scores: softmax statistics over a vocabulary, one row of logits at a time, for the
// per-token log-probs and entropies of RL trainers (python/dualkv/logprobs.py calls these on
// chunks of scored rows). With z = logits * inverse_temperature and p = softmax(z) per row:
//
//   forward:  lse[r] = log sum_j exp(z[r, j]),  entropy[r] = -sum_j p[r, j] log p[r, j]
//             (a token's log-prob is then z[r, target] - lse[r], gathered by the caller);
//   backward: grad_logits = d/d logits of sum_u grad_logprob[u] (z[r_u, target_u] - lse[r_u])
//             + grad_entropy[u] entropy[r_u], over the token uses u of each row r_u.
//
// One read of the logits forward, one read and one write backward, in fp32 whatever the storage
// type: the chain of framework operations this replaces made about ten fp32 passes per chunk.
#pragma once

#include <cstdint>

#include "dualkv/params.h"
#include "dualkv/tensor.h"

namespace dualkv {

// A (rows, vocab) matrix, vocab contiguous; rows row_stride elements apart (>= vocab).
template <typename Pointer>
struct VocabRows {
  Pointer data = nullptr;
  DType dtype = DType::kFloat32;
  Device device{};
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t row_stride = 0;
};

// `count` contiguous values on `device`.
template <typename Pointer>
struct Values {
  Pointer data = nullptr;
  Device device{};
  int64_t count = 0;
};

struct TokenScoresForwardParams {
  VocabRows<const void*> logits;
  float inverse_temperature = 1.0f;  // finite and > 0
  Values<float*> lse;                // rows values, overwritten
  Values<float*> entropy;            // rows values, overwritten
  ExecutionOptions options{};        // cpu_threads and stream; the rest is attention-only
};

// The token uses of each row: row r scores the tokens targets[offsets[r] .. offsets[r + 1]), each
// with its two incoming gradients. A row may score no token (its gradient is then 0) or the same
// token more than once (a shared prompt row scoring the first token of several responses). A row
// whose lse is not finite (NaN in it, or all -inf) gets NaN whatever its uses.
struct TokenUses {
  Values<const int64_t*> offsets;  // rows + 1 values: offsets[0] = 0, non-decreasing, last = uses
  Values<const int64_t*> targets;  // uses values in [0, vocab)
  Values<const float*> grad_logprob;
  Values<const float*> grad_entropy;
};

struct TokenScoresBackwardParams {
  VocabRows<const void*> logits;
  float inverse_temperature = 1.0f;
  Values<const float*> lse;      // the forward's, rows values
  Values<const float*> entropy;  // the forward's, rows values
  TokenUses uses;
  VocabRows<void*> grad_logits;  // logits' shape, dtype and device; overwritten
  ExecutionOptions options{};
};

// Shapes, dtypes, devices and scalars are validated before anything runs (dualkv::Error naming
// the argument). The contents of uses.offsets and uses.targets are checked where they are read:
// the CPU path throws dualkv::Error before writing; the CUDA path cannot read device memory
// without a host synchronisation, so its kernel fills a row whose uses break the rules with NaN
// (never a plausible gradient, never an out-of-bounds access).
void token_scores_forward(const TokenScoresForwardParams& params);
void token_scores_backward(const TokenScoresBackwardParams& params);

}  // namespace dualkv
