// The Hopper backward's dQ conversion (atomic mode): dq = the token's slots of the fp32 accumulator
// (dq_accumulator.h) times dq_accum_scale, in dq's dtype and strides.
//
// Warp roles: none; kHeadDim / 8 consecutive threads own one (token, head) row. A block of the
// accumulator keeps the wgmma register order, in which 16 contiguous bytes hold two columns of
// rows r and r + 8 of a 16-row group: so the thread of a row in the first half of its group
// converts columns [8 chunk, 8 chunk + 8) of that row and of the row 8 further, from four
// contiguous 16-byte loads per slot, and the threads of second-half rows have nothing to do. No
// shared memory, no pipeline.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/cuda_check.h"
#include "cuda/sm80/backward/preprocess_kernel.cuh"
#include "cuda/sm90/backward/dq_accumulator.h"

namespace dualkv::detail::sm90 {

// The pairing the kernel relies on: values (row, 2 p + e) and (row + 8, 2 p + e) of rows in the
// first half of a 16-row group are floats 4 p + e and 4 p + 2 + e from the row's column 0 of its
// 8-column group.
static_assert(dq_fragment_offset_at(8, 0) == dq_fragment_offset_at(0, 0) + 2 &&
              dq_fragment_offset_at(0, 1) == dq_fragment_offset_at(0, 0) + 1 &&
              dq_fragment_offset_at(0, 6) == dq_fragment_offset_at(0, 0) + 12 && dq_fragment_offset_at(0, 0) % 4 == 0);

// The accumulator of one call, as the conversion reads it.
struct TiledDqAccumulator {
  const float* data;
  int64_t head_stride;       // floats per query head
  int64_t tail_slots_begin;  // dq_tail_slots_begin
};

// The four 16-byte pieces of columns [8 chunk, 8 chunk + 8) of a first-half row's 16-row group in
// `slot`: piece p holds (row, 8 chunk + 2 p + e) at e and (row + 8, 8 chunk + 2 p + e) at 2 + e.
template <typename Config>
__device__ __forceinline__ void load_row_pair(const TiledDqAccumulator& accumulator, int64_t slot, int head,
                                              int tile_row, int column, float4 (&pieces)[4]) {
  const int warpgroup = Config::kDqWarpgroupsAlongM == 1 ? column / 64 : tile_row / 64;
  const float* block = accumulator.data + dq_block_offset(head, accumulator.head_stride, slot, Config::kBlockM,
                                                          Config::kHeadDim, warpgroup);
  const auto* first =
      reinterpret_cast<const float4*>(block + dq_fragment_offset_at(tile_row - Config::dq_block_first_row(warpgroup),
                                                                    column - Config::dq_block_first_column(warpgroup)));
  CUTLASS_PRAGMA_UNROLL
  for (int p = 0; p < 4; ++p) pieces[p] = first[p];
}

template <typename Element, typename Config>
__global__ void __launch_bounds__(256)
    convert_tiled_dq_kernel(const BackwardKernelParams p, const TiledDqAccumulator accumulator) {
  using Chunks = sm80::RowChunks<Element, Config::kHeadDim>;
  const int64_t row = int64_t{blockIdx.x} * Chunks::kRowsPerBlock + threadIdx.x / Chunks::kPerRow;
  if (row >= int64_t{p.tokens} * p.heads) return;
  const int token = static_cast<int>(row / p.heads);
  const int head = static_cast<int>(row % p.heads);
  const int column = 8 * (threadIdx.x % Chunks::kPerRow);
  const DqRowSlots slots = dq_row_slots(p.cu_seqlens, p.num_segments, p.cu_runs, p.num_runs, token,
                                        accumulator.tail_slots_begin, Config::kBlockM);
  const int tile_row = token - slots.tile_begin;
  if (tile_row % 16 >= 8) return;  // converted with the row 8 before it
  const int partner = token + 8;
  const bool has_partner = partner < slots.tile_end;

  float4 pieces[4];
  load_row_pair<Config>(accumulator, slots.tile_slot, head, tile_row, column, pieces);
  float first[8], second[8];
  CUTLASS_PRAGMA_UNROLL
  for (int q = 0; q < 4; ++q) {
    first[2 * q] = pieces[q].x, first[2 * q + 1] = pieces[q].y;
    second[2 * q] = pieces[q].z, second[2 * q + 1] = pieces[q].w;
  }
  // Rows of responses that start or end inside the tile add their own segment's slot there.
  const int64_t partner_own_slot =
      has_partner ? dq_own_slot_of_later_row(p.cu_seqlens, slots, partner, Config::kBlockM) : -1;
  if (slots.own_slot >= 0) {
    load_row_pair<Config>(accumulator, slots.own_slot, head, tile_row, column, pieces);
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < 4; ++q) first[2 * q] += pieces[q].x, first[2 * q + 1] += pieces[q].y;
  }
  if (partner_own_slot >= 0) {
    load_row_pair<Config>(accumulator, partner_own_slot, head, tile_row, column, pieces);
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < 4; ++q) second[2 * q] += pieces[q].z, second[2 * q + 1] += pieces[q].w;
  }
  sm80::store_dq_chunk<Element>(p, token, head, column, first);
  if (has_partner) sm80::store_dq_chunk<Element>(p, partner, head, column, second);
}

template <typename Element, typename Config>
void launch_convert_tiled_dq(const BackwardKernelParams& p, int64_t head_stride, cudaStream_t stream) {
  const TiledDqAccumulator accumulator{p.dq_accum, head_stride,
                                       dq_tail_slots_begin(p.tokens, p.num_segments, Config::kBlockM)};
  convert_tiled_dq_kernel<Element, Config>
      <<<sm80::backward_row_blocks<Element, Config::kHeadDim>(p), sm80::RowChunks<Element, Config::kHeadDim>::kThreads,
         0, stream>>>(p, accumulator);
  check_launch("convert_tiled_dq_kernel");
}

}  // namespace dualkv::detail::sm90
