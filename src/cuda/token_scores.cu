// CUDA token scores (include/dualkv/token_scores.h): the log-sum-exp and entropy of each row of
// logits in one read (forward), and the gradient of the log-probs and entropies with respect to
// the logits in one read and one write (backward).
//
// Warp roles: none; one CTA of kThreads per row, every thread alike. Each thread streams its
// share of the row in 16-byte vectors when the row is 16-byte aligned (scalars otherwise, and for
// the last vocab % vector elements), keeping softmax statistics relative to its running maximum.
// Pipeline: none; the loop is unrolled so that several loads are in flight per thread.
// Shared memory: kThreads / 32 partial statistics for the block reduction.
//
// Arithmetic is in base 2 (z2 = logit * inverse_temperature * log2(e)), converted to natural
// units at the end. Masked logits (-inf) contribute 0; NaN anywhere in a row makes the row's
// statistics NaN (maxima use max.NaN, exponents are clamped by it at -200 so that -inf * 0 never
// occurs while NaN passes).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_guard.h"
#include "host/backend.h"

namespace dualkv::detail {
namespace {

constexpr int kThreads = 256;
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kExponentFloor = -200.0f;  // 2^-200 is 0 in fp32

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float max_nan(float a, float b) {
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// 16-bit and fp32 storage: a 16-byte vector of kPerVector elements, and scalar conversions.
template <typename Element>
struct Storage;

template <>
struct Storage<float> {
  static constexpr int kPerVector = 4;
  __device__ static float to_float(float x) { return x; }
  __device__ static float from_float(float x) { return x; }
};

template <>
struct Storage<__half> {
  static constexpr int kPerVector = 8;
  __device__ static float to_float(__half x) { return __half2float(x); }
  __device__ static __half from_float(float x) { return __float2half_rn(x); }
};

template <>
struct Storage<__nv_bfloat16> {
  static constexpr int kPerVector = 8;
  __device__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

template <typename Element>
union Vector {
  uint4 bits;
  Element values[Storage<Element>::kPerVector];
};

// A row of `vocab` elements, `vectors` of them read as 16-byte vectors (0 when the row is not
// 16-byte aligned), the rest as scalars.
template <typename Element>
struct RowSpan {
  int64_t vectors;
  int64_t vocab;

  __device__ RowSpan(const void* row, const void* other_row, int64_t row_vocab) : vocab(row_vocab) {
    const bool aligned = reinterpret_cast<uintptr_t>(row) % 16 == 0 && reinterpret_cast<uintptr_t>(other_row) % 16 == 0;
    vectors = aligned ? row_vocab / Storage<Element>::kPerVector : 0;
  }
  __device__ int64_t first_scalar() const { return vectors * Storage<Element>::kPerVector; }
};

// Softmax statistics of part of a row, base 2: max = the largest z2, sum = sum 2^(z2 - max),
// weighted = sum (z2 - max) 2^(z2 - max). Empty: max -inf, sum 0.
struct Stats {
  float max = -INFINITY;
  float sum = 0.0f;
  float weighted = 0.0f;

  // Moves the reference maximum to `to` (>= max, or NaN).
  __device__ __forceinline__ void rescale(float to) {
    if (sum != 0.0f) {  // sum is 0 exactly while max is -inf; NaN passes
      const float shift = max - to;
      const float factor = exp2_approx(shift);
      weighted = factor * fmaf(shift, sum, weighted);
      sum *= factor;
    }
    max = to;
  }

  template <int kCount>
  __device__ __forceinline__ void add(const float (&z2)[kCount]) {
    float block_max = z2[0];
#pragma unroll
    for (int k = 1; k < kCount; ++k) block_max = max_nan(block_max, z2[k]);
    if (block_max == -INFINITY) return;  // all masked
    const float new_max = max_nan(max, block_max);
    if (new_max != max) rescale(new_max);  // also taken for NaN
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const float d = max_nan(z2[k] - max, kExponentFloor);
      const float e = exp2_approx(d);
      sum += e;
      weighted = fmaf(d, e, weighted);
    }
  }

  __device__ __forceinline__ void merge(Stats other) {
    const float new_max = max_nan(max, other.max);
    if (new_max == -INFINITY) return;
    rescale(new_max);
    other.rescale(new_max);
    sum += other.sum;
    weighted += other.weighted;
  }
};

__device__ Stats block_merge(Stats stats) {
  __shared__ Stats warp_stats[kThreads / 32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    Stats other;
    other.max = __shfl_xor_sync(0xffffffffu, stats.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, stats.sum, offset);
    other.weighted = __shfl_xor_sync(0xffffffffu, stats.weighted, offset);
    stats.merge(other);
  }
  if (threadIdx.x % 32 == 0) warp_stats[threadIdx.x / 32] = stats;
  __syncthreads();
  Stats total = warp_stats[0];
  for (int w = 1; w < kThreads / 32; ++w) total.merge(warp_stats[w]);
  return total;
}

template <typename Element>
__global__ void __launch_bounds__(kThreads)
    token_scores_forward_kernel(const Element* logits, int64_t row_stride, int64_t vocab, float scale_log2, float* lse,
                                float* entropy) {
  constexpr int kPerVector = Storage<Element>::kPerVector;
  const int64_t r = blockIdx.x;
  const Element* row = logits + r * row_stride;
  const RowSpan<Element> span(row, row, vocab);
  Stats stats;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < span.vectors; i += kThreads) {
    Vector<Element> v;
    v.bits = __ldg(reinterpret_cast<const uint4*>(row) + i);
    float z2[kPerVector];
#pragma unroll
    for (int k = 0; k < kPerVector; ++k) z2[k] = Storage<Element>::to_float(v.values[k]) * scale_log2;
    stats.add(z2);
  }
  for (int64_t j = span.first_scalar() + threadIdx.x; j < vocab; j += kThreads) {
    const float z2[1] = {Storage<Element>::to_float(row[j]) * scale_log2};
    stats.add(z2);
  }
  const Stats total = block_merge(stats);
  if (threadIdx.x == 0) {
    const float log2_sum = log2f(total.sum);
    lse[r] = kLn2 * (total.max + log2_sum);
    entropy[r] = kLn2 * (log2_sum - total.weighted / total.sum);
  }
}

// d/dz of sum_u grad_logprob[u] logprob_u + grad_entropy[u] H over a row's uses, without the
// targets' one-hot terms, as -p (A + B log2 p): A = sum grad_logprob + H sum grad_entropy,
// B = ln 2 sum grad_entropy (log p = ln 2 log2 p).
struct RowGradient {
  float lse2;        // lse in base 2
  float scale_log2;  // inverse_temperature * log2(e)
  float a, b;
  float inverse_temperature;

  __device__ __forceinline__ float dense(float logit) const {
    const float log2_p = max_nan(logit * scale_log2 - lse2, kExponentFloor);
    return -exp2_approx(log2_p) * fmaf(b, log2_p, a) * inverse_temperature;
  }
};

template <typename Element>
__global__ void __launch_bounds__(kThreads)
    token_scores_backward_kernel(const Element* logits, int64_t row_stride, int64_t vocab, float inverse_temperature,
                                 const float* lse, const float* entropy, const int64_t* offsets, const int64_t* targets,
                                 const float* grad_logprob, const float* grad_entropy, int64_t uses, int64_t rows,
                                 Element* grad, int64_t grad_row_stride) {
  constexpr int kPerVector = Storage<Element>::kPerVector;
  const int64_t r = blockIdx.x;
  const Element* row = logits + r * row_stride;
  Element* grad_row = grad + r * grad_row_stride;
  const int64_t begin = offsets[r], end = offsets[r + 1];
  // TokenUses' rules, checked where they are read: a row that breaks them becomes NaN.
  bool bad = begin < 0 || end < begin || end > uses || (r == 0 && begin != 0) || (r == rows - 1 && end != uses);
  float logprob_total = 0.0f, entropy_total = 0.0f;
  if (!bad) {
    for (int64_t u = begin; u < end; ++u) {
      logprob_total += grad_logprob[u];
      entropy_total += grad_entropy[u];
    }
    for (int64_t u = begin + threadIdx.x; u < end; u += kThreads) bad = bad || targets[u] < 0 || targets[u] >= vocab;
  }
  if (__syncthreads_or(bad)) {
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) grad_row[j] = Storage<Element>::from_float(NAN);
    return;
  }
  const RowGradient gradient{lse[r] * kLog2E, inverse_temperature * kLog2E, logprob_total + entropy[r] * entropy_total,
                             kLn2 * entropy_total, inverse_temperature};
  const RowSpan<Element> span(row, grad_row, vocab);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < span.vectors; i += kThreads) {
    Vector<Element> in, out;
    in.bits = __ldg(reinterpret_cast<const uint4*>(row) + i);
#pragma unroll
    for (int k = 0; k < kPerVector; ++k) {
      out.values[k] = Storage<Element>::from_float(gradient.dense(Storage<Element>::to_float(in.values[k])));
    }
    reinterpret_cast<uint4*>(grad_row)[i] = out.bits;
  }
  for (int64_t j = span.first_scalar() + threadIdx.x; j < vocab; j += kThreads) {
    grad_row[j] = Storage<Element>::from_float(gradient.dense(Storage<Element>::to_float(row[j])));
  }
  // The targets' one-hot terms: each distinct target of the row once, with all its uses, after
  // every dense value of the row is written (the barrier orders this block's global writes).
  __syncthreads();
  for (int64_t u = begin + threadIdx.x; u < end; u += kThreads) {
    const int64_t target = targets[u];
    bool first = true;
    float one_hot = 0.0f;
    for (int64_t v = begin; v < end; ++v) {
      if (targets[v] != target) continue;
      first = first && v >= u;
      one_hot += grad_logprob[v];
    }
    if (first) {
      const float logit = Storage<Element>::to_float(row[target]);
      grad_row[target] = Storage<Element>::from_float(gradient.dense(logit) + one_hot * inverse_temperature);
    }
  }
}

template <typename Element>
void launch_forward(const TokenScoresForwardParams& p, cudaStream_t stream) {
  token_scores_forward_kernel<Element><<<static_cast<unsigned>(p.logits.rows), kThreads, 0, stream>>>(
      static_cast<const Element*>(p.logits.data), p.logits.row_stride, p.logits.vocab, p.inverse_temperature * kLog2E,
      p.lse.data, p.entropy.data);
  check_launch("token_scores_forward_kernel");
}

template <typename Element>
void launch_backward(const TokenScoresBackwardParams& p, cudaStream_t stream) {
  token_scores_backward_kernel<Element><<<static_cast<unsigned>(p.logits.rows), kThreads, 0, stream>>>(
      static_cast<const Element*>(p.logits.data), p.logits.row_stride, p.logits.vocab, p.inverse_temperature,
      p.lse.data, p.entropy.data, p.uses.offsets.data, p.uses.targets.data, p.uses.grad_logprob.data,
      p.uses.grad_entropy.data, p.uses.targets.count, p.logits.rows, static_cast<Element*>(p.grad_logits.data),
      p.grad_logits.row_stride);
  check_launch("token_scores_backward_kernel");
}

template <typename Element>
struct ElementTag {
  using type = Element;
};

// Calls launch(ElementTag<Element>{}, stream) for the logits' dtype, on their device.
template <typename Params, typename Launch>
void launch_for_dtype(const Params& p, Launch launch) {
  const DeviceGuard guard(p.logits.device.index);
  const auto stream = static_cast<cudaStream_t>(p.options.stream);
  switch (p.logits.dtype) {
    case DType::kFloat32:
      return launch(ElementTag<float>{}, stream);
    case DType::kFloat16:
      return launch(ElementTag<__half>{}, stream);
    case DType::kBFloat16:
      return launch(ElementTag<__nv_bfloat16>{}, stream);
  }
}

}  // namespace

void cuda_token_scores_forward(const TokenScoresForwardParams& params) {
  launch_for_dtype(
      params, [&](auto tag, cudaStream_t stream) { launch_forward<typename decltype(tag)::type>(params, stream); });
}

void cuda_token_scores_backward(const TokenScoresBackwardParams& params) {
  launch_for_dtype(
      params, [&](auto tag, cudaStream_t stream) { launch_backward<typename decltype(tag)::type>(params, stream); });
}

}  // namespace dualkv::detail
