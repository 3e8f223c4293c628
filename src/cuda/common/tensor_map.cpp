#include "cuda/common/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.h"
#include "dualkv/errors.h"

namespace dualkv::detail {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 function = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found),
               "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
      throw RuntimeError("the CUDA driver has no cuTensorMapEncodeTiled (the Hopper kernels need driver >= 12.0)");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return function;
}

// A stride of a dimension of extent 1 is never used to address; TMA still wants a multiple of
// 16 bytes there, so such a stride is replaced by the row size.
uint64_t stride_bytes(int64_t stride, int64_t extent, int64_t element_bytes, int64_t head_dim) {
  return static_cast<uint64_t>((extent == 1 ? head_dim : stride) * element_bytes);
}

// Encodes a tiled descriptor; `name` is what an Error names if the driver refuses it.
CUtensorMap encode(CUtensorMapDataType type, cuuint32_t rank, const void* data, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                   const std::string& name) {
  const cuuint32_t element_strides[3] = {1u, 1u, 1u};
  CUtensorMap map{};
  const CUresult status = encode_tiled()(&map, type, rank, const_cast<void*>(data), dims, strides, box, element_strides,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw Error(name, "cannot be described to the TMA unit (cuTensorMapEncodeTiled error " + std::to_string(status) +
                          "): data and strides must be 16-byte aligned and strides below 2^40 bytes");
  }
  return map;
}

}  // namespace

CUtensorMap make_token_head_tensor_map(const InputTensor& t, int box_columns, int box_rows, const std::string& name) {
  const int64_t element_bytes = dtype_size(t.dtype);
  const CUtensorMapDataType type =
      t.dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(t.head_dim), static_cast<cuuint64_t>(t.heads),
                              static_cast<cuuint64_t>(t.tokens)};
  const cuuint64_t strides[2] = {stride_bytes(t.head_stride, t.heads, element_bytes, t.head_dim),
                                 stride_bytes(t.token_stride, t.tokens, element_bytes, t.head_dim)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_columns), 1u, static_cast<cuuint32_t>(box_rows)};
  return encode(type, 3, t.data, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B, name);
}

}  // namespace dualkv::detail
