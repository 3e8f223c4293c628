// CPU token scores (include/dualkv/token_scores.h): rows in parallel, each row in two passes
// (its maximum, then the sums relative to it) with double accumulation. The CUDA kernels are
// checked against this path.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "cpu/thread_pool.h"
#include "dualkv/errors.h"
#include "host/backend.h"
#include "host/float16.h"

namespace dualkv::detail {
namespace {

double logit_at(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(data)[index];
    case DType::kFloat16:
      return fp16_to_float(static_cast<const uint16_t*>(data)[index]);
    case DType::kBFloat16:
      return bf16_to_float(static_cast<const uint16_t*>(data)[index]);
  }
  return 0.0;
}

void store_at(void* data, DType dtype, int64_t index, double value) {
  const auto f = static_cast<float>(value);
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(data)[index] = f;
      break;
    case DType::kFloat16:
      static_cast<uint16_t*>(data)[index] = float_to_fp16(f);
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(data)[index] = float_to_bf16(f);
      break;
  }
}

// lse and entropy of row r of z = logits * inverse_temperature. A row of -inf only (everything
// masked) has lse -inf and entropy NaN; NaN anywhere in the row makes both NaN.
void row_statistics(const VocabRows<const void*>& logits, double inverse_temperature, int64_t r, double& lse,
                    double& entropy) {
  const int64_t base = r * logits.row_stride;
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < logits.vocab; ++j) {
    const double z = logit_at(logits.data, logits.dtype, base + j) * inverse_temperature;
    if (std::isnan(z)) {
      lse = entropy = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    max = std::max(max, z);
  }
  double sum = 0.0, weighted = 0.0;  // sum e, sum (z - max) e, with e = exp(z - max)
  if (max > -std::numeric_limits<double>::infinity()) {
    for (int64_t j = 0; j < logits.vocab; ++j) {
      const double d = logit_at(logits.data, logits.dtype, base + j) * inverse_temperature - max;
      const double e = std::exp(d);
      if (e > 0.0) {
        sum += e;
        weighted += d * e;
      }
    }
  }
  lse = max + std::log(sum);
  entropy = std::log(sum) - weighted / sum;
}

// The rules of TokenUses on the host copy of its contents.
void check_uses(const TokenUses& uses, int64_t rows, int64_t vocab) {
  const int64_t* offsets = uses.offsets.data;
  if (offsets[0] != 0) throw Error("uses.offsets[0]", "must be 0, got " + std::to_string(offsets[0]));
  for (int64_t r = 0; r < rows; ++r) {
    if (offsets[r + 1] < offsets[r]) {
      throw Error("uses.offsets[" + std::to_string(r + 1) + "]", "must be >= uses.offsets[" + std::to_string(r) +
                                                                     "] (" + std::to_string(offsets[r]) + "), got " +
                                                                     std::to_string(offsets[r + 1]));
    }
  }
  if (offsets[rows] != uses.targets.count) {
    throw Error("uses.offsets[" + std::to_string(rows) + "]", "must equal the number of uses (" +
                                                                  std::to_string(uses.targets.count) + "), got " +
                                                                  std::to_string(offsets[rows]));
  }
  for (int64_t u = 0; u < uses.targets.count; ++u) {
    const int64_t target = uses.targets.data[u];
    if (target < 0 || target >= vocab) {
      throw Error("uses.targets[" + std::to_string(u) + "]",
                  "must be in [0, vocab) = [0, " + std::to_string(vocab) + "), got " + std::to_string(target));
    }
  }
}

}  // namespace

void cpu_token_scores_forward(const TokenScoresForwardParams& p) {
  const int threads = cpu::resolve_thread_count(p.options.cpu_threads);
  cpu::parallel_for(p.logits.rows, threads, [&](int64_t r) {
    double lse = 0.0, entropy = 0.0;
    row_statistics(p.logits, p.inverse_temperature, r, lse, entropy);
    p.lse.data[r] = static_cast<float>(lse);
    p.entropy.data[r] = static_cast<float>(entropy);
  });
}

// grad z_j = sum_u grad_logprob[u] ([j = target_u] - p_j) - grad_entropy[u] p_j (log p_j + H),
// and grad logits = grad z * inverse_temperature.
void cpu_token_scores_backward(const TokenScoresBackwardParams& p) {
  check_uses(p.uses, p.logits.rows, p.logits.vocab);
  const int threads = cpu::resolve_thread_count(p.options.cpu_threads);
  const double inverse_temperature = p.inverse_temperature;
  cpu::parallel_for(p.logits.rows, threads, [&](int64_t r) {
    const int64_t begin = p.uses.offsets.data[r], end = p.uses.offsets.data[r + 1];
    double logprob_total = 0.0, entropy_total = 0.0;
    for (int64_t u = begin; u < end; ++u) {
      logprob_total += p.uses.grad_logprob.data[u];
      entropy_total += p.uses.grad_entropy.data[u];
    }
    const double lse = p.lse.data[r], entropy = p.entropy.data[r];
    const auto dense_gradient = [&](int64_t j) {  // without the targets' one-hot terms
      const double log_p =
          logit_at(p.logits.data, p.logits.dtype, r * p.logits.row_stride + j) * inverse_temperature - lse;
      const double probability = std::exp(log_p);
      return probability == 0.0 ? 0.0 : -probability * (logprob_total + entropy_total * (log_p + entropy));
    };
    const auto store = [&](int64_t j, double g) {
      store_at(p.grad_logits.data, p.grad_logits.dtype, r * p.grad_logits.row_stride + j, g * inverse_temperature);
    };
    for (int64_t j = 0; j < p.logits.vocab; ++j) store(j, dense_gradient(j));
    // Each distinct target once, with every use of it in the row (a token scored twice gets both).
    for (int64_t u = begin; u < end; ++u) {
      const int64_t target = p.uses.targets.data[u];
      bool first = true;
      double one_hot = 0.0;
      for (int64_t v = begin; v < end; ++v) {
        if (p.uses.targets.data[v] != target) continue;
        first = first && v >= u;
        one_hot += p.uses.grad_logprob.data[v];
      }
      if (first) store(target, dense_gradient(target) + one_hot);
    }
  });
}

}  // namespace dualkv::detail
