// TMA descriptors (CUtensorMap) for the (tokens, heads, head_dim) tensors of the API, encoded on
// the host through the driver entry point the CUDA runtime hands out (no link against libcuda).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "dualkv/tensor.h"

namespace dualkv::detail {

// Tensor t seen as a 3-D (head_dim, heads, tokens) array, loaded in boxes of {box_columns, 1,
// box_rows} with the 128-byte swizzle (box_columns * 2 bytes must be 128). Rows past `tokens`
// read as zeros. `name` is the argument named if the tensor cannot be described (TMA needs
// 16-byte aligned data and strides, which check_vector_aligned already enforces).
CUtensorMap make_token_head_tensor_map(const InputTensor& t, int box_columns, int box_rows, const std::string& name);

}  // namespace dualkv::detail
