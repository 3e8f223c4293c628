// Plain causal attention in fp32: deliberately naive so that it is obviously correct.
//
// Warp roles: none; every thread of a block does the same work on different keys, queries or
// feature columns. Pipeline stages: none; operands are read straight from global memory.
// Shared memory: one float per key (forward, dQ) or per query of the current chunk (dK/dV) for
// the scores/probabilities of the row a block owns, plus 32 floats of reduction scratch.
//
// Blocks: forward and dQ use one block per (query row, query head) and loop over the row's keys;
// dK/dV use one block per (key row, kv head) and loop over the queries (of every query head of
// the group) that see the key. No atomics, so results are deterministic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "device_memory.h"
#include "reference_attention.h"

namespace dualkv_test::cuda_reference {
namespace {

constexpr int kThreads = 128;
// dK/dV blocks keep head_dim / kThreads accumulators per thread in registers.
constexpr int kMaxColumnsPerThread = 2;
constexpr int kMaxHeadDim = kThreads * kMaxColumnsPerThread;
constexpr size_t kMaxSharedBytes = 48 * 1024;
// ptxas may merge the unrolled loop's remainder reads of the score row into one wide shared-memory
// load (up to 16 bytes) that extends past the last score; rounding the row's allocation up to
// whole 16-byte groups keeps such reads inside it (compute-sanitizer memcheck flagged them).
constexpr int kScoresPerGroup = 4;

struct Dims {
  int64_t rows;
  int heads;
  int kv_heads;
  int dim;
  float scale;
  OperandRounding rounding;
};

__device__ float round_operand(float value, OperandRounding rounding) {
  switch (rounding) {
    case OperandRounding::kFloat16:
      return __half2float(__float2half_rn(value));
    case OperandRounding::kBFloat16:
      return __bfloat162float(__float2bfloat16_rn(value));
    default:
      return value;
  }
}

__device__ float dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Every thread gets the reduction over the block. Starts with a barrier so that `scratch` is
// free again after a previous call, and ends with one, so callers may read shared memory that
// any thread wrote before the call.
template <typename Op>
__device__ float block_reduce(float value, Op op, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  float result = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) result = op(result, scratch[w]);
  return result;
}

__device__ const float* row_of(const float* tensor, int64_t row, int heads, int head, int dim) {
  return tensor + (row * heads + head) * dim;
}

__global__ void forward_kernel(const int32_t* sequence_begin, const float* q, const float* k, const float* v,
                               float* out, float* lse, Dims dims) {
  extern __shared__ float probs[];
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int head = blockIdx.y;
  const int kv_head = head / (dims.heads / dims.kv_heads);
  const int64_t first_key = sequence_begin[row];
  const int keys = static_cast<int>(row - first_key + 1);
  const float* q_row = row_of(q, row, dims.heads, head, dims.dim);

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    probs[j] = dims.scale * dot(q_row, row_of(k, first_key + j, dims.kv_heads, kv_head, dims.dim), dims.dim);
    local_max = fmaxf(local_max, probs[j]);
  }
  const float row_max = block_reduce(local_max, Max(), scratch);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    const float p = expf(probs[j] - row_max);
    local_sum += p;
    probs[j] = round_operand(p, dims.rounding);
  }
  const float row_sum = block_reduce(local_sum, Sum(), scratch);

  float* out_row = out + (row * dims.heads + head) * dims.dim;
  for (int i = threadIdx.x; i < dims.dim; i += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc += probs[j] * row_of(v, first_key + j, dims.kv_heads, kv_head, dims.dim)[i];
    out_row[i] = acc / row_sum;
  }
  if (threadIdx.x == 0) lse[head * dims.rows + row] = row_max + logf(row_sum);
}

// dQ of one (query row, head), and D = rowsum(dO * O) of that row for the dK/dV kernel.
__global__ void dq_kernel(const int32_t* sequence_begin, const float* q, const float* k, const float* v,
                          const float* out, const float* lse, const float* dout, float* dq, float* delta, Dims dims) {
  extern __shared__ float dscores[];
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int head = blockIdx.y;
  const int kv_head = head / (dims.heads / dims.kv_heads);
  const int64_t first_key = sequence_begin[row];
  const int keys = static_cast<int>(row - first_key + 1);
  const float* q_row = row_of(q, row, dims.heads, head, dims.dim);
  const float* dout_row = row_of(dout, row, dims.heads, head, dims.dim);
  const float* out_row = row_of(out, row, dims.heads, head, dims.dim);

  float local = 0.0f;
  for (int i = threadIdx.x; i < dims.dim; i += blockDim.x) local += dout_row[i] * out_row[i];
  const float row_delta = block_reduce(local, Sum(), scratch);
  const float row_lse = lse[head * dims.rows + row];
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    const float p =
        expf(dims.scale * dot(q_row, row_of(k, first_key + j, dims.kv_heads, kv_head, dims.dim), dims.dim) - row_lse);
    const float dp = dot(dout_row, row_of(v, first_key + j, dims.kv_heads, kv_head, dims.dim), dims.dim);
    dscores[j] = round_operand(p * (dp - row_delta), dims.rounding);
  }
  __syncthreads();
  float* dq_row = dq + (row * dims.heads + head) * dims.dim;
  for (int i = threadIdx.x; i < dims.dim; i += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc += dscores[j] * row_of(k, first_key + j, dims.kv_heads, kv_head, dims.dim)[i];
    dq_row[i] = dims.scale * acc;
  }
  if (threadIdx.x == 0) delta[head * dims.rows + row] = row_delta;
}

// dK and dV of one (key row, kv head): sums over the queries at or after the key in its
// sequence, for every query head that reads this kv head, taken kThreads queries at a time.
__global__ void dkdv_kernel(const int32_t* sequence_end, const float* q, const float* k, const float* v,
                            const float* lse, const float* dout, const float* delta, float* dk, float* dv, Dims dims) {
  __shared__ float probs[kThreads];
  __shared__ float dscores[kThreads];
  const int64_t key = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int group = dims.heads / dims.kv_heads;
  const int64_t end = sequence_end[key];
  const float* k_row = row_of(k, key, dims.kv_heads, kv_head, dims.dim);
  const float* v_row = row_of(v, key, dims.kv_heads, kv_head, dims.dim);

  float dk_acc[kMaxColumnsPerThread] = {};
  float dv_acc[kMaxColumnsPerThread] = {};
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int64_t chunk = key; chunk < end; chunk += kThreads) {
      const int64_t query = chunk + threadIdx.x;
      if (query < end) {
        const float s = dims.scale * dot(row_of(q, query, dims.heads, head, dims.dim), k_row, dims.dim);
        const float p = expf(s - lse[head * dims.rows + query]);
        const float dp = dot(row_of(dout, query, dims.heads, head, dims.dim), v_row, dims.dim);
        probs[threadIdx.x] = round_operand(p, dims.rounding);
        dscores[threadIdx.x] = round_operand(p * (dp - delta[head * dims.rows + query]), dims.rounding);
      }
      __syncthreads();
      const int queries = end - chunk < kThreads ? static_cast<int>(end - chunk) : kThreads;
#pragma unroll
      for (int c = 0; c < kMaxColumnsPerThread; ++c) {
        const int i = threadIdx.x + c * kThreads;
        if (i >= dims.dim) break;
        for (int j = 0; j < queries; ++j) {
          dv_acc[c] += probs[j] * row_of(dout, chunk + j, dims.heads, head, dims.dim)[i];
          dk_acc[c] += dscores[j] * row_of(q, chunk + j, dims.heads, head, dims.dim)[i];
        }
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (int c = 0; c < kMaxColumnsPerThread; ++c) {
    const int i = threadIdx.x + c * kThreads;
    if (i >= dims.dim) break;
    dk[(key * dims.kv_heads + kv_head) * dims.dim + i] = dims.scale * dk_acc[c];
    dv[(key * dims.kv_heads + kv_head) * dims.dim + i] = dv_acc[c];
  }
}

// A host array uploaded to a fresh device allocation.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count), memory_(count * sizeof(T)) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { memory_.upload(host.data()); }
  T* get() const { return static_cast<T*>(memory_.data()); }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    memory_.download(host.data());
    return host;
  }

 private:
  size_t count_;
  DeviceBytes memory_;
};

struct RowBounds {
  std::vector<int32_t> begin;  // first row of each row's sequence
  std::vector<int32_t> end;    // one past its last row
  int32_t longest = 0;
};

RowBounds row_bounds(const std::vector<int32_t>& cu_seqlens) {
  RowBounds bounds;
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    bounds.longest = std::max(bounds.longest, cu_seqlens[s + 1] - cu_seqlens[s]);
    for (int32_t r = cu_seqlens[s]; r < cu_seqlens[s + 1]; ++r) {
      bounds.begin.push_back(cu_seqlens[s]);
      bounds.end.push_back(cu_seqlens[s + 1]);
    }
  }
  return bounds;
}

// Dynamic shared memory of a block that keeps one score per key of the longest sequence.
size_t score_row_bytes(const RowBounds& bounds) {
  const int32_t groups = (bounds.longest + kScoresPerGroup - 1) / kScoresPerGroup;
  return static_cast<size_t>(groups) * kScoresPerGroup * sizeof(float);
}

Dims make_dims(const RowBounds& bounds, const Shape& shape, OperandRounding rounding) {
  if (shape.dim > kMaxHeadDim || shape.heads % shape.kv_heads != 0) {
    throw std::invalid_argument("reference attention: head_dim must be <= 256 and heads a multiple of kv_heads");
  }
  if (score_row_bytes(bounds) > kMaxSharedBytes) {
    throw std::invalid_argument("reference attention: sequences longer than 12288 rows are not supported");
  }
  return Dims{static_cast<int64_t>(bounds.begin.size()),
              static_cast<int>(shape.heads),
              static_cast<int>(shape.kv_heads),
              static_cast<int>(shape.dim),
              shape.scale,
              rounding};
}

void check_launch(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
  check_cuda(cudaDeviceSynchronize(), kernel);
}

}  // namespace

ForwardResult causal_forward(const std::vector<int32_t>& cu_seqlens, const Shape& shape, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v, OperandRounding rounding) {
  const RowBounds bounds = row_bounds(cu_seqlens);
  const Dims dims = make_dims(bounds, shape, rounding);
  const DeviceArray<int32_t> begin(bounds.begin);
  const DeviceArray<float> q_d(q), k_d(k), v_d(v);
  DeviceArray<float> out(q.size()), lse(dims.rows * dims.heads);
  const dim3 grid(static_cast<unsigned>(dims.rows), dims.heads);
  forward_kernel<<<grid, kThreads, score_row_bytes(bounds)>>>(begin.get(), q_d.get(), k_d.get(), v_d.get(), out.get(),
                                                              lse.get(), dims);
  check_launch("reference forward_kernel");
  return ForwardResult{out.download(), lse.download()};
}

Gradients causal_backward(const std::vector<int32_t>& cu_seqlens, const Shape& shape, const std::vector<float>& q,
                          const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& out,
                          const std::vector<float>& lse, const std::vector<float>& dout, OperandRounding rounding) {
  const RowBounds bounds = row_bounds(cu_seqlens);
  const Dims dims = make_dims(bounds, shape, rounding);
  const DeviceArray<int32_t> begin(bounds.begin), end(bounds.end);
  const DeviceArray<float> q_d(q), k_d(k), v_d(v), out_d(out), lse_d(lse), dout_d(dout);
  DeviceArray<float> delta(dims.rows * dims.heads), dq(q.size()), dk(k.size()), dv(v.size());
  dq_kernel<<<dim3(static_cast<unsigned>(dims.rows), dims.heads), kThreads, score_row_bytes(bounds)>>>(
      begin.get(), q_d.get(), k_d.get(), v_d.get(), out_d.get(), lse_d.get(), dout_d.get(), dq.get(), delta.get(),
      dims);
  check_launch("reference dq_kernel");
  dkdv_kernel<<<dim3(static_cast<unsigned>(dims.rows), dims.kv_heads), kThreads>>>(
      end.get(), q_d.get(), k_d.get(), v_d.get(), lse_d.get(), dout_d.get(), delta.get(), dk.get(), dv.get(), dims);
  check_launch("reference dkdv_kernel");
  return Gradients{dq.download(), dk.download(), dv.download()};
}

}  // namespace dualkv_test::cuda_reference
