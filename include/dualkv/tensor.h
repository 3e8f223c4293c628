// Strided views of the caller's memory. dualkv never owns or allocates tensor storage.
#pragma once

#include <cstdint>

namespace dualkv {

enum class DType : int { kFloat32, kFloat16, kBFloat16 };

enum class DeviceKind : int { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // CUDA ordinal; 0 for the CPU
};

inline bool operator==(Device a, Device b) { return a.kind == b.kind && a.index == b.index; }
inline bool operator!=(Device a, Device b) { return !(a == b); }

const char* dtype_name(DType dtype);
int dtype_size(DType dtype);

// A (tokens, heads, head_dim) view. The head dimension is contiguous (stride 1); token and head
// strides are in elements and may describe any non-overlapping layout (e.g. a slice of a fused
// QKV projection). Pointer is `const void*` for inputs and `void*` for outputs.
template <typename Pointer>
struct TokenHeadTensor {
  Pointer data = nullptr;
  DType dtype = DType::kFloat32;
  Device device{};
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t token_stride = 0;  // elements between token t and t+1
  int64_t head_stride = 0;   // elements between head h and h+1
};

using InputTensor = TokenHeadTensor<const void*>;
using OutputTensor = TokenHeadTensor<void*>;

// The softmax log-sum-exp, (heads, tokens) in fp32, token dimension contiguous.
// Natural logarithm of sum_k exp(scale * q.k) over the visible keys of each query.
template <typename Pointer>
struct LseTensor {
  Pointer data = nullptr;
  Device device{};
  int64_t heads = 0;
  int64_t tokens = 0;
  int64_t head_stride = 0;  // elements between head h and h+1
};

using LseInput = LseTensor<const float*>;
using LseOutput = LseTensor<float*>;

}  // namespace dualkv
