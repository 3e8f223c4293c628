#include "cuda/common/argument_checks.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/cuda_check.h"

namespace dualkv::detail {

void check_device_pointer(const void* pointer, Device device, const std::string& name) {
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, pointer);
  if (status == cudaErrorInvalidValue) {
    cudaGetLastError();  // not sticky: clear it so that it does not surface at the next launch
    throw Error(name + ".device", "is not memory the CUDA runtime knows");
  }
  check_cuda(status, "cudaPointerGetAttributes");
  const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (!on_device) {
    throw Error(name + ".device", "declared cuda:" + std::to_string(device.index) + " but the pointer is host memory");
  }
  if (attributes.device != device.index) {
    throw Error(name + ".device", "declared cuda:" + std::to_string(device.index) +
                                      " but the memory is on cuda:" + std::to_string(attributes.device));
  }
}

void check_compiled_dtype(DType dtype, const std::string& name) {
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    throw Error(name, std::string(dtype_name(dtype)) + " is not compiled for CUDA; compiled: float16, bfloat16");
  }
}

void check_compiled_head_dim(int64_t head_dim, const int* compiled, size_t count, const std::string& name) {
  std::string list;
  for (size_t i = 0; i < count; ++i) {
    const int d = compiled[i];
    if (d == head_dim) return;
    list += (list.empty() ? "" : ", ") + std::to_string(d);
  }
  throw Error(name, std::to_string(head_dim) + " is not compiled for CUDA; compiled: " + list);
}

void check_cuda_accumulation(Accumulation accumulation) {
  if (accumulation == Accumulation::kFloat64) {
    throw Error("options.accumulation", "fp64 accumulation is CPU-only");
  }
}

void check_vector_aligned(const void* data, int64_t element_bytes, int64_t tokens, int64_t token_stride, int64_t heads,
                          int64_t head_stride, const std::string& name) {
  if (reinterpret_cast<uintptr_t>(data) % kVectorBytes != 0) {
    throw Error(name + ".data", "must be " + std::to_string(kVectorBytes) + "-byte aligned on CUDA");
  }
  const int64_t elements = kVectorBytes / element_bytes;
  // A stride of a dimension of extent 1 is never applied, so it need not be aligned.
  if (tokens > 1 && token_stride % elements != 0) {
    throw Error(name + ".token_stride", "must be a multiple of " + std::to_string(elements) +
                                            " elements on CUDA (16-byte vector access), got " +
                                            std::to_string(token_stride));
  }
  if (heads > 1 && head_stride % elements != 0) {
    throw Error(name + ".head_stride", "must be a multiple of " + std::to_string(elements) +
                                           " elements on CUDA (16-byte vector access), got " +
                                           std::to_string(head_stride));
  }
}

}  // namespace dualkv::detail
