// Tile shape and shared-memory plan of the sm80 forward kernel (forward_config.cuh builds its
// types from these). Plain C++, so that the entry point sizes its query plan and checks the
// shared-memory limit with the numbers the kernel is compiled with, and a CPU test checks them.
#pragma once

#include <cstddef>

namespace dualkv::detail::sm80 {

// Block shape for one head dimension: block_m query rows per CTA, block_n keys per pipeline step,
// `warps` warps each owning block_m / warps query rows.
struct ForwardTileShape {
  int block_m;
  int block_n;
  int warps;
};

// Shared memory holds one Q tile and one K and one V block: (block_m + 2 * block_n) rows of
// head_dim 16-bit elements. The choices keep that within an sm_80 CTA's 163 KiB and, for d <= 128,
// leave room for two CTAs per SM on sm_90.
constexpr ForwardTileShape forward_tile_shape(int head_dim) {
  return head_dim <= 64    ? ForwardTileShape{128, 128, 4}
         : head_dim <= 128 ? ForwardTileShape{128, 64, 4}
                           : ForwardTileShape{128, 64, 8};
}

constexpr size_t forward_shared_memory_bytes(int head_dim) {
  return static_cast<size_t>(forward_tile_shape(head_dim).block_m + 2 * forward_tile_shape(head_dim).block_n) *
         static_cast<size_t>(head_dim) * 2;
}

}  // namespace dualkv::detail::sm80
