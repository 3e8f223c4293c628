// Host-visible interface of the sm90a forward kernel: its parameter block and the launcher each
// instantiation unit (src/cuda/sm90/forward_<dtype>_d<D>.cu, compiled for sm_90a only) provides.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "dualkv/tensor.h"
#include "host/query_plan.h"

namespace dualkv::detail::sm90 {

// Everything the kernel reads, by value (a __grid_constant__ parameter: the TMA descriptors must
// live in parameter, constant or global memory). Strides are in elements.
struct ForwardKernelParams {
  CUtensorMap q_map;  // Q as (d, H, T), box (64, 1, block_m), 128-byte swizzle
  CUtensorMap k_map;  // K as (d, Hk, T), box (64, 1, block_n), 128-byte swizzle
  CUtensorMap v_map;  // V likewise
  void* out;
  float* lse;
  int64_t out_token_stride, out_head_stride;
  int64_t lse_head_stride;
  const QueryTile* tiles;  // the work plan, in the caller's workspace
  const KeyRange* ranges;
  int32_t num_tiles;
  int32_t heads;              // H
  int32_t heads_per_kv_head;  // H / Hk: query head h reads kv head h / heads_per_kv_head
  float softmax_scale;        // for the natural-log LSE
  float softmax_scale_log2;   // softmax_scale * log2(e): softmax runs on exp2
};

// A persistent grid of `ctas` CTAs walks the num_tiles * heads work items.
template <DType kDType, int kHeadDim>
void launch_forward(const ForwardKernelParams& params, int ctas, cudaStream_t stream);

// The shared memory one CTA asks for, for the entry's fits-the-device check.
template <DType kDType, int kHeadDim>
size_t forward_shared_memory_bytes();

}  // namespace dualkv::detail::sm90
