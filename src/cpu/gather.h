// Reading and writing one (token, head) row of a strided tensor in its storage dtype, converting
// to and from the accumulator type. The head dimension is contiguous (include/dualkv/tensor.h).
#pragma once

#include <cstdint>

#include "dualkv/tensor.h"
#include "host/float16.h"

namespace dualkv::detail::cpu {

// Element offset of (token, head, 0); strides are in elements of the tensor's dtype.
template <typename Pointer>
int64_t row_offset(const TokenHeadTensor<Pointer>& tensor, int64_t token, int64_t head) {
  return token * tensor.token_stride + head * tensor.head_stride;
}

template <typename Acc>
void load_row(const InputTensor& tensor, int64_t token, int64_t head, Acc* row) {
  const int64_t offset = row_offset(tensor, token, head);
  const int64_t n = tensor.head_dim;
  switch (tensor.dtype) {
    case DType::kFloat32: {
      const float* src = static_cast<const float*>(tensor.data) + offset;
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<Acc>(src[i]);
      return;
    }
    case DType::kFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(tensor.data) + offset;
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<Acc>(fp16_to_float(src[i]));
      return;
    }
    case DType::kBFloat16: {
      const uint16_t* src = static_cast<const uint16_t*>(tensor.data) + offset;
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<Acc>(bf16_to_float(src[i]));
      return;
    }
  }
}

// Rounds each value to the output dtype; a double reaches the 16-bit types through float.
template <typename Acc>
void store_row(const OutputTensor& tensor, int64_t token, int64_t head, const Acc* row) {
  const int64_t offset = row_offset(tensor, token, head);
  const int64_t n = tensor.head_dim;
  switch (tensor.dtype) {
    case DType::kFloat32: {
      float* dst = static_cast<float*>(tensor.data) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(row[i]);
      return;
    }
    case DType::kFloat16: {
      uint16_t* dst = static_cast<uint16_t*>(tensor.data) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = float_to_fp16(static_cast<float>(row[i]));
      return;
    }
    case DType::kBFloat16: {
      uint16_t* dst = static_cast<uint16_t*>(tensor.data) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(static_cast<float>(row[i]));
      return;
    }
  }
}

}  // namespace dualkv::detail::cpu
