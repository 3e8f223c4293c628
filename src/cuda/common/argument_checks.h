// Checks that only the CUDA path needs, run after host validation and before any launch:
// the configuration is compiled, every pointer is device memory on the declared device, and
// tensors allow the kernels' 16-byte vector accesses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dualkv/errors.h"
#include "dualkv/params.h"
#include "dualkv/tensor.h"

namespace dualkv::detail {

// Bytes of one vector access of the kernels (cp.async and stores of 8 fp16/bf16 elements).
constexpr int kVectorBytes = 16;

// Error "<name>.device" unless `pointer` is device (or managed) memory of CUDA device `device`.
void check_device_pointer(const void* pointer, Device device, const std::string& name);

// Error "<name>" unless dtype is fp16 or bf16: the kernels are compiled for these only.
void check_compiled_dtype(DType dtype, const std::string& name);

// Error "<name>" unless head_dim is one of compiled[0 .. count).
void check_compiled_head_dim(int64_t head_dim, const int* compiled, size_t count, const std::string& name);

template <size_t kCount>
void check_compiled_head_dim(int64_t head_dim, const int (&compiled)[kCount], const std::string& name) {
  check_compiled_head_dim(head_dim, compiled, kCount, name);
}

// Error "options.accumulation" for kFloat64, which only the CPU path has.
void check_cuda_accumulation(Accumulation accumulation);

// Error "<name>.data" / "<name>.token_stride" / "<name>.head_stride" unless every row of
// head_dim elements starts on a kVectorBytes boundary.
void check_vector_aligned(const void* data, int64_t element_bytes, int64_t tokens, int64_t token_stride, int64_t heads,
                          int64_t head_stride, const std::string& name);

template <typename Pointer>
void check_vector_aligned(const TokenHeadTensor<Pointer>& t, const std::string& name) {
  check_vector_aligned(t.data, dtype_size(t.dtype), t.tokens, t.token_stride, t.heads, t.head_stride, name);
}

}  // namespace dualkv::detail
