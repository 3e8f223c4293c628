// Tile shapes and shared-memory plans of the sm80 forward kernel (forward_config.cuh builds its
// types from this table). Plain C++, so that the entry point chooses a shape for the device's
// shared memory and sizes its query plan with the numbers the kernel is compiled with, and a CPU
// test checks them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/sm80/tile_shape_table.h"

namespace dualkv::detail::sm80 {

// Block shape of one kernel instantiation: block_m query rows per CTA, block_n keys per pipeline
// step, `warps` warps each owning block_m / warps query rows (whole 16-row MMA strips) and their
// (rows x head_dim) fp32 O accumulator: 128 registers per thread at head_dim 128 and 256.
struct ForwardTileShape {
  int head_dim;
  int block_m;
  int block_n;
  int warps;
};

// Shared memory holds one Q tile and one K and one V block: (block_m + 2 * block_n) rows of
// head_dim 16-bit elements (forward_kernel.cuh).
constexpr size_t forward_shared_memory_bytes(const ForwardTileShape& shape) {
  return static_cast<size_t>(shape.block_m + 2 * shape.block_n) * static_cast<size_t>(shape.head_dim) * 2;
}

// Every compiled shape, fastest first within a head_dim: a forward runs the first shape of its
// head_dim that fits the shared memory a block may use (select_forward_tile_shape). Opt-in limits
// per block: H100/H200 227 KiB, A100 163 KiB, sm_86/sm_89 (A10, L40, RTX 30/40) 99 KiB. Each entry
// is one kernel instantiation (src/cuda/forward_<dtype>_d<head_dim>_m<block_m>_n<block_n>.cu).
inline constexpr ForwardTileShape kForwardTileShapes[] = {
    {64, 128, 128, 4},  // 64 KiB: every sm_80+ GPU, two CTAs per SM on A100 and Hopper
    {128, 128, 64, 4},  // 64 KiB: likewise
    {256, 128, 64, 8},  // 128 KiB: A100, H100, H200
    {256, 64, 64, 4},   // 96 KiB: sm_86/sm_89
};

// The compiled shape of (head_dim, block_m, block_n), or nullptr.
constexpr const ForwardTileShape* find_forward_tile_shape(int64_t head_dim, int block_m, int block_n) {
  for (const ForwardTileShape& shape : kForwardTileShapes) {
    if (shape.head_dim == head_dim && shape.block_m == block_m && shape.block_n == block_n) return &shape;
  }
  return nullptr;
}

// The first shape of head_dim that fits `limit_bytes` of shared memory per block. Throws
// dualkv::Error naming q.head_dim if no shape is compiled for head_dim, and naming `limit_name`
// if none fits the limit.
inline const ForwardTileShape& select_forward_tile_shape(int64_t head_dim, size_t limit_bytes, const char* limit_name) {
  return select_tile_shape(kForwardTileShapes, head_dim, limit_bytes, limit_name, "the CUDA forward",
                           [](const ForwardTileShape& shape) { return forward_shared_memory_bytes(shape); });
}

}  // namespace dualkv::detail::sm80
