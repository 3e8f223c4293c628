// Host work planning for the CUDA forward pass: which query tiles exist and which key ranges
// each one reads. Plain C++ so that a CPU test can check it; the CUDA layer uploads the result.
//
// A query tile is at most block_m consecutive query rows of ONE segment (tiles never straddle
// segments, so every row of a tile has the same visibility rule). A tile reads
//   - the prompt key range [prompt_begin, prompt_end) without causal masking (every key there
//     precedes every query of a response), empty for a tile inside a prompt, and then
//   - its own segment's keys [self_begin, q_end) causally.
// Tiles are ordered heaviest first (most visible keys) so that a grid walking the list in order
// starts the long tiles early and finishes with short ones, which balances the last wave.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dualkv/layout.h"

namespace dualkv::detail {

// Block shape of the sm80 forward kernel for one head dimension. block_m query rows per CTA,
// block_n keys per pipeline step, `warps` warps each owning block_m / warps query rows.
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

// One query tile as the kernel reads it (int32 token indices into the packed tensors).
struct ForwardTile {
  int32_t q_begin;       // first query row
  int32_t q_end;         // one past the last query row; q_end - q_begin <= block_m
  int32_t prompt_begin;  // prompt keys read without causal masking; empty for prompt tiles
  int32_t prompt_end;
  int32_t self_begin;  // first key of the tile's own segment; its keys [self_begin, q_end) are causal
};

// Keys a tile sees at its last row: the ordering weight.
inline int64_t forward_tile_keys(const ForwardTile& tile) {
  return static_cast<int64_t>(tile.prompt_end - tile.prompt_begin) + (tile.q_end - tile.self_begin);
}

int64_t count_forward_tiles(const Layout& layout, int block_m);

// Every query row in exactly one tile; ordered by forward_tile_keys, descending (stable, so tiles
// of equal weight stay in packed order).
std::vector<ForwardTile> plan_forward_tiles(const Layout& layout, int block_m);

}  // namespace dualkv::detail
