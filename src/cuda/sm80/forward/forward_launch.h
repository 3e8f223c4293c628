// Host-visible interface of the sm80 forward kernel: the head dimensions it is compiled for, and
// the launcher each instantiation unit (src/cuda/forward_<dtype>_d<D>.cu) provides.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/forward_kernel_params.h"
#include "dualkv/tensor.h"

namespace dualkv::detail {

// Head dimensions with a compiled sm80 forward kernel, for each of float16 and bfloat16.
constexpr int kSm80ForwardHeadDims[] = {64, 128};

// One CTA per (tile, head) work item, `work_items` = tiles * heads of them.
template <DType kDType, int kHeadDim>
void launch_sm80_forward(const ForwardKernelParams& params, int32_t work_items, cudaStream_t stream);

}  // namespace dualkv::detail
