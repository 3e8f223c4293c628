// Host-visible interface of the sm80 forward kernel: its parameter block, the head dimensions it
// is compiled for, and the launcher each instantiation unit (src/cuda/forward_<dtype>_d<D>.cu)
// provides.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "dualkv/tensor.h"
#include "host/query_plan.h"

namespace dualkv::detail {

// Head dimensions with a compiled sm80 forward kernel, for each of float16 and bfloat16.
constexpr int kSm80ForwardHeadDims[] = {64, 128};

// Everything the kernel reads, by value. Strides are in elements; all Q/K/V/O rows are 16-byte
// aligned (checked before launch).
struct ForwardKernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  int64_t q_token_stride, q_head_stride;
  int64_t k_token_stride, k_head_stride;
  int64_t v_token_stride, v_head_stride;
  int64_t out_token_stride, out_head_stride;
  int64_t lse_head_stride;
  const QueryTile* tiles;     // the query plan (host/query_plan.h), in device memory
  const KeyRange* ranges;     // the key ranges its tiles index
  int32_t heads;              // H
  int32_t heads_per_kv_head;  // H / Hk: query head h reads kv head h / heads_per_kv_head
  float softmax_scale;        // for the natural-log LSE
  float softmax_scale_log2;   // softmax_scale * log2(e): softmax runs on exp2
};

// One CTA per (tile, head) work item, `work_items` = tiles * heads of them.
template <DType kDType, int kHeadDim>
void launch_sm80_forward(const ForwardKernelParams& params, int32_t work_items, cudaStream_t stream);

}  // namespace dualkv::detail
