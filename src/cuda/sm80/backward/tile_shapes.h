// Tile shapes and shared-memory plans of the sm80 backward kernels (kernel_traits.cuh builds their
// types from this table). Plain C++, so that the entry point chooses a shape for the device's
// shared memory with the numbers the kernels are compiled with, and a CPU test checks them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/sm80/tile_shape_table.h"

namespace dualkv::detail::sm80 {

// The KV-major kernel keeps a (key_block x head_dim) dK and dV tile in fp32 registers over kv_warps
// warps (a (kv_warps / 2) x 2 grid): 2 * key_block * head_dim / (32 * kv_warps) registers per
// thread (128 at head_dim 128 and 256). The dQ kernel keeps a (dq_query_block x head_dim) dQ tile:
// dq_query_block / 16 warps, 16 rows each (head_dim / 2 registers per thread).
struct BackwardTileShape {
  int head_dim;
  int key_block;       // KV-major kernel: keys per work item
  int query_block;     // KV-major kernel: queries per inner step
  int query_stages;    // KV-major kernel: Q/dO buffers; 2 lets the next step's loads overlap a whole step
  int kv_warps;        // KV-major kernel: warps
  int dq_query_block;  // dQ kernel: queries per work item
  int dq_key_block;    // dQ kernel: keys per inner step
};

// Every compiled shape, fastest first within a head_dim: a backward runs the first shape of its
// head_dim whose kernels fit the shared memory a block may use (select_backward_tile_shape).
// Opt-in limits per block: H100/H200 227 KiB, A100 163 KiB, sm_86/sm_89 (A10, L40, RTX 30/40)
// 99 KiB. Each (head_dim, key_block, query_block) is one kernel instantiation
// (src/cuda/backward_<dtype>_d<head_dim>_k<key_block>_q<query_block>.cu). At head_dim 256 a key
// tile's dK and dV take 64 keys over 8 warps (FlashAttention-2's choice), or 32 over 4 where
// 99 KiB hold neither two Q/dO stages nor 64 keys.
inline constexpr BackwardTileShape kBackwardTileShapes[] = {
    {64, 128, 64, 2, 8, 64, 64},   // KV kernel 97 KiB: every sm_80+ GPU
    {128, 128, 64, 2, 8, 64, 64},  // KV kernel 161 KiB: A100, H100, H200
    {128, 128, 32, 1, 8, 64, 64},  // KV kernel 96.3 KiB: sm_86/sm_89 (1.18x the time of 128 x 64 on an H100)
    {256, 64, 64, 1, 8, 64, 32},   // KV kernel 144.5 KiB, dQ kernel 128.5 KiB: A100, H100, H200
    {256, 32, 32, 1, 4, 64, 16},   // KV kernel 68.3 KiB, dQ kernel 96.5 KiB: sm_86/sm_89
};

// The compiled shape of (head_dim, key_block, query_block), or nullptr.
constexpr const BackwardTileShape* find_backward_tile_shape(int64_t head_dim, int key_block, int query_block) {
  for (const BackwardTileShape& shape : kBackwardTileShapes) {
    if (shape.head_dim == head_dim && shape.key_block == key_block && shape.query_block == query_block) return &shape;
  }
  return nullptr;
}

// Shared memory of one KV-major CTA (16-bit elements): K and V tiles; Q and dO tiles per stage;
// P^T and dS^T; LSE and D per stage (kv_kernel.cuh's KvSharedStorage; the launcher asserts they
// agree).
constexpr size_t backward_kv_shared_memory_bytes(const BackwardTileShape& shape) {
  const auto key = static_cast<size_t>(shape.key_block);
  const auto query = static_cast<size_t>(shape.query_block);
  const auto stages = static_cast<size_t>(shape.query_stages);
  const auto dim = static_cast<size_t>(shape.head_dim);
  return (2 * key * dim + stages * 2 * query * dim + 2 * key * query) * 2 + stages * 2 * query * sizeof(float);
}

// Shared memory of one deterministic dQ CTA: Q and dO tiles; K and V tiles in two stages; LSE and
// D (dq_kernel.cuh's DqSharedStorage).
constexpr size_t backward_dq_shared_memory_bytes(const BackwardTileShape& shape) {
  const auto query = static_cast<size_t>(shape.dq_query_block);
  const auto key = static_cast<size_t>(shape.dq_key_block);
  const auto dim = static_cast<size_t>(shape.head_dim);
  return (2 * query * dim + 2 * 2 * key * dim) * 2 + 2 * query * sizeof(float);
}

// The most shared memory any kernel of a backward with `shape` asks for per block.
constexpr size_t backward_shared_memory_bytes(const BackwardTileShape& shape, bool deterministic) {
  const size_t kv = backward_kv_shared_memory_bytes(shape);
  const size_t dq = backward_dq_shared_memory_bytes(shape);
  return deterministic && dq > kv ? dq : kv;
}

// The first shape of head_dim (fastest first) whose kernels fit `limit_bytes` of shared memory
// per block. Throws dualkv::Error naming q.head_dim if no shape is compiled for head_dim, and
// naming `limit_name` if none fits the limit.
inline const BackwardTileShape& select_backward_tile_shape(int64_t head_dim, bool deterministic, size_t limit_bytes,
                                                           const char* limit_name) {
  return select_tile_shape(
      kBackwardTileShapes, head_dim, limit_bytes, limit_name, "the CUDA backward",
      [deterministic](const BackwardTileShape& shape) { return backward_shared_memory_bytes(shape, deterministic); });
}

}  // namespace dualkv::detail::sm80
