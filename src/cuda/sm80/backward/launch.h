// Entry point of the sm80 backward for one compiled (dtype, tile shape), the shape named by
// (head_dim, key_block, query_block) in tile_shapes.h; instantiated in
// src/cuda/backward_<dtype>_d<head_dim>_k<key_block>_q<query_block>.cu.
#pragma once

#include "cuda/common/backward_kernel_params.h"
#include "dualkv/tensor.h"

namespace dualkv::detail::sm80 {

// Runs preprocess, the KV-major kernel, and then either the dQ conversion (atomic mode, when
// params.dq_accum is set) or the query-major dQ kernel (deterministic mode), on params.stream.
// Throws dualkv::RuntimeError if a launch fails.
template <DType kDType, int kHeadDim, int kKeyBlock, int kQueryBlock>
void run_backward(const BackwardKernelParams& params);

}  // namespace dualkv::detail::sm80
