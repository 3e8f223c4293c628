// Host-visible interface of the sm90a backward: its parameter block and the launcher each
// instantiation unit (src/cuda/sm90/backward_<dtype>_d<D>.cu, compiled for sm_90a only) provides.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "cuda/common/backward_kernel_params.h"
#include "dualkv/tensor.h"

namespace dualkv::detail::sm90 {

// Everything the KV kernel reads, by value (a __grid_constant__ parameter: the TMA descriptors
// must live in parameter, constant or global memory).
struct BackwardTmaParams {
  CUtensorMap q_map;             // Q as (d, H, T), box (64, 1, block_m), 128-byte swizzle
  CUtensorMap dout_map;          // dO likewise
  CUtensorMap k_map;             // K as (d, Hk, T), box (64, 1, block_n), 128-byte swizzle
  CUtensorMap v_map;             // V likewise
  int64_t dq_accum_head_stride;  // floats per query head of base.dq_accum (dq_accumulator.h); atomic mode only
  BackwardKernelParams base;
};

// The whole backward of one call: the pre-pass, the KV kernel over num_key_tiles x Hk CTAs, then
// the dQ conversion (atomic mode) or the portable query-major dQ kernel (deterministic mode).
template <DType kDType, int kHeadDim>
void run_backward(const BackwardTmaParams& params);

// The shared memory the KV kernel asks for, for the entry's fits-the-device check.
template <DType kDType, int kHeadDim>
size_t backward_shared_memory_bytes();

}  // namespace dualkv::detail::sm90
