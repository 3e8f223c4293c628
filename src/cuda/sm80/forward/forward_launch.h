// Host-visible interface of the sm80 forward kernel: the head dimensions it is compiled for, and
// the launcher each instantiation unit (src/cuda/forward_<dtype>_d<D>_m<M>_n<N>.cu) provides.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/forward_kernel_params.h"
#include "dualkv/tensor.h"

namespace dualkv::detail {

// Head dimensions with a compiled sm80 forward kernel, for each of float16 and bfloat16.
constexpr int kSm80ForwardHeadDims[] = {64, 128, 256};

// One CTA per (tile, head) work item, `work_items` = tiles * heads of them, with the tile shape
// (kHeadDim, kBlockM, kBlockN) of sm80/forward/tile_shape.h.
template <DType kDType, int kHeadDim, int kBlockM, int kBlockN>
void launch_sm80_forward(const ForwardKernelParams& params, int32_t work_items, cudaStream_t stream);

}  // namespace dualkv::detail
