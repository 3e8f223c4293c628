// sm80 fused forward kernel (FlashAttention-2 structure on CuTe, cp.async + mma.sync).
//
// Work: CTA i handles query tile i / H of the host plan (host/query_plan.h, heaviest first) for
// head i % H, so the H heads of one tile run side by side and read the same K/V rows (GQA-adjacent
// heads share them in L2). The CTA walks the key blocks of the tile's key-range list
// (cuda/common/key_block_walk.h): ancestor ranges (the prompt) unmasked but for a range's last
// partial block, its own segment causally, with one online softmax across all ranges. Entering a
// range reads its bounds from the plan: one uniform load per range, none per block.
//
// Warp roles: all kWarps warps are alike. Every thread issues cp.async for its share of each
// tile; warp w computes query rows {16w + 16*kWarps*i} of S = Q K^T and O += P V, so the softmax
// statistics of a row live in one quad of one warp and never need shared memory. Shapes
// (tile_shape.h; head_dim: kBlockM x kBlockN, warps): 64: 128 x 128, 4; 128: 128 x 64, 4;
// 256: 128 x 64, 8, or 64 x 64, 4 on sm_86/sm_89. At 128 and 256 a thread holds 128 fp32 values
// of O.
//
// Pipeline (two stages, K and V alternating in their own buffers): while S(b) = Q K(b)^T runs,
// V(b) is in flight; while softmax and P V(b) run, K(b+1) is in flight. Each wait is preceded by
// the barrier that also proves every warp has finished reading the buffer about to be reloaded.
//
// Shared memory (16-bit elements, rows in XOR-swizzled 128-byte chunks):
//   [0, kBlockM x d)             Q tile, loaded once; reused for the O tile in the epilogue
//   [.., + kBlockN x d)          K block
//   [.., + kBlockN x d)          V block (read transposed by ldmatrix.trans for P V)
// 64 KiB at head_dim 64 and 128; at 256, 128 KiB (A100, Hopper) or 96 KiB (sm_86/sm_89).
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/key_block_walk.h"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sm80/forward/forward_config.cuh"
#include "cuda/sm80/forward/forward_launch.h"
#include "cuda/sm80/forward/score_mask.cuh"
#include "cuda/sm80/mma.cuh"
#include "cuda/sm80/tile_io.cuh"

namespace dualkv::detail::sm80 {

template <typename Config>
__global__ void __launch_bounds__(Config::kThreads) forward_kernel(const __grid_constant__ ForwardKernelParams p) {
  using namespace cute;
  using Element = typename Config::Element;
  using BlockQ = Shape<Int<Config::kBlockM>, Int<Config::kHeadDim>>;
  using BlockKV = Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>;
  using BlockS = Shape<Int<Config::kBlockM>, Int<Config::kBlockN>>;
  const int thread = threadIdx.x;

  const int head = blockIdx.x % p.heads;
  const QueryTile tile = p.tiles[blockIdx.x / p.heads];
  const int kv_head = head / p.heads_per_kv_head;
  const int rows = tile.q_end - tile.q_begin;
  using Walk = KeyBlockWalk<Config::kBlockN>;
  Walk walk(tile, p.ranges);

  extern __shared__ __align__(128) char shared_bytes[];
  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(shared_bytes)), typename Config::SmemLayoutQ{});
  Tensor sK = make_tensor(sQ.data() + cosize(sQ.layout()), typename Config::SmemLayoutKV{});
  Tensor sV = make_tensor(sK.data() + cosize(sK.layout()), typename Config::SmemLayoutKV{});
  Tensor sVt = make_tensor(sV.data(), typename Config::SmemLayoutVt{});
  Tensor sO = sQ;

  const Element* q_tile = static_cast<const Element*>(p.q) + tile.q_begin * p.q_token_stride + head * p.q_head_stride;
  Element* out_tile = static_cast<Element*>(p.out) + tile.q_begin * p.out_token_stride + head * p.out_head_stride;
  const Element* k_head = static_cast<const Element*>(p.k) + kv_head * p.k_head_stride;
  const Element* v_head = static_cast<const Element*>(p.v) + kv_head * p.v_head_stride;
  Tensor gQ = make_tensor(make_gmem_ptr(q_tile), BlockQ{}, make_stride(p.q_token_stride, _1{}));
  Tensor gO = make_tensor(make_gmem_ptr(out_tile), BlockQ{}, make_stride(p.out_token_stride, _1{}));

  // global -> shared
  typename Config::GmemLoad gmem_load;
  auto load_slice = gmem_load.get_thread_slice(thread);
  Tensor tQsQ = load_slice.partition_D(sQ);
  Tensor tQcQ = load_slice.partition_D(make_identity_tensor(BlockQ{}));
  Tensor tKsK = load_slice.partition_D(sK);
  Tensor tVsV = load_slice.partition_D(sV);
  Tensor tKVcKV = load_slice.partition_D(make_identity_tensor(BlockKV{}));
  // This thread's share of key rows [0, kBlockN) of the head; a block's share is the same
  // partition moved by key_begin rows, so the row offsets are computed once, not per block.
  Tensor tKgK =
      load_slice.partition_S(make_tensor(make_gmem_ptr(k_head), BlockKV{}, make_stride(p.k_token_stride, _1{})));
  Tensor tVgV =
      load_slice.partition_S(make_tensor(make_gmem_ptr(v_head), BlockKV{}, make_stride(p.v_token_stride, _1{})));
  // Full blocks (all but the last of each range) load without row predicates.
  auto load_key_block = [&](const auto& head_rows, int64_t token_stride, auto& destination, const Walk& block) {
    Tensor source = make_tensor(head_rows.data() + block.key_begin() * token_stride, head_rows.layout());
    if (!block.reaches_past_range()) {
      copy(gmem_load, source, destination);
    } else {
      load_rows_async(gmem_load, source, destination, tKVcKV, block.range_end() - block.key_begin());
    }
  };

  // shared -> registers -> tensor cores
  typename Config::TiledMma mma;
  auto mma_slice = mma.get_thread_slice(thread);
  Tensor tSrQ = mma_slice.partition_fragment_A(sQ);
  Tensor tSrK = mma_slice.partition_fragment_B(sK);
  Tensor tOrVt = mma_slice.partition_fragment_B(sVt);
  Tensor acc_o = partition_fragment_C(mma, BlockQ{});
  Tensor tScS = mma_slice.partition_C(make_identity_tensor(BlockS{}));
  auto smem_load_q = make_tiled_copy_A(typename Config::SmemLoadAtom{}, mma);
  auto smem_load_k = make_tiled_copy_B(typename Config::SmemLoadAtom{}, mma);
  auto smem_load_v = make_tiled_copy_B(typename Config::SmemLoadAtomTransposed{}, mma);
  Tensor tSsQ = smem_load_q.get_thread_slice(thread).partition_S(sQ);
  Tensor tSsK = smem_load_k.get_thread_slice(thread).partition_S(sK);
  Tensor tOsVt = smem_load_v.get_thread_slice(thread).partition_S(sVt);

  Tensor out = make_tensor(acc_o.data(), accumulator_rows_by_columns(acc_o.layout()));
  constexpr int kRowsPerThread = decltype(size<0>(out))::value;
  OnlineSoftmax<kRowsPerThread> softmax;
  clear(acc_o);

  load_rows_async(gmem_load, load_slice.partition_S(gQ), tQsQ, tQcQ, rows);
  load_key_block(tKgK, p.k_token_stride, tKsK, walk);
  cp_async_fence();

  // Top-tested although every tile has a block: as a do-while loop ptxas spilled the K/V row
  // offsets across the softmax (d = 64: 4 -> 48 spilled bytes).
  while (!walk.done()) {
    Tensor acc_s = partition_fragment_C(mma, BlockS{});
    clear(acc_s);
    cp_async_wait<0>();
    __syncthreads();  // K(block) has landed and every warp is done with V(block - 1)
    load_key_block(tVgV, p.v_token_stride, tVsV, walk);
    cp_async_fence();

    gemm_from_shared(mma, acc_s, tSrQ, tSrK, tSsQ, tSsK, smem_load_q, smem_load_k);
    const BlockMask mask = walk.mask();
    if (mask == BlockMask::kBounds) {
      mask_scores<false>(acc_s, tScS, tile.q_begin, walk.key_begin(), walk.range_end());
    } else if (mask == BlockMask::kCausal) {
      mask_scores<true>(acc_s, tScS, tile.q_begin, walk.key_begin(), walk.range_end());
    }

    cp_async_wait<0>();
    __syncthreads();  // V(block) has landed and every warp is done with K(block)
    walk.advance();
    if (!walk.done()) load_key_block(tKgK, p.k_token_stride, tKsK, walk);
    cp_async_fence();

    Tensor scores = make_tensor(acc_s.data(), accumulator_rows_by_columns(acc_s.layout()));
    softmax.update(scores, out, p.softmax_scale_log2);
    Tensor probabilities = convert_fragment<Element>(acc_s);
    Tensor tOrP = make_tensor(probabilities.data(), accumulator_as_operand_a(probabilities.layout()));
    gemm_a_in_registers(mma, acc_o, tOrP, tOrVt, tOsVt, smem_load_v);
  }

  // Epilogue: normalise, LSE straight from registers, O through shared memory for 16-byte stores.
  float lse[kRowsPerThread];
  softmax.finish(out, p.softmax_scale, lse);
  Tensor tOcO = mma_slice.partition_C(make_identity_tensor(BlockQ{}));
  Tensor tOcO_rows = make_tensor(tOcO.data(), accumulator_rows_by_columns(tOcO.layout()));
  store_row_lse(tOcO_rows, lse, p.lse + head * p.lse_head_stride + tile.q_begin, rows);

  Tensor o_fragment = convert_fragment<Element>(acc_o);
  auto smem_store_o = make_tiled_copy_C(typename Config::SmemStoreAtomO{}, mma);
  auto store_o_slice = smem_store_o.get_thread_slice(thread);
  __syncthreads();  // every warp is done reading Q before the tile is overwritten with O
  copy(smem_store_o, store_o_slice.retile_S(o_fragment), store_o_slice.partition_D(sO));
  __syncthreads();

  typename Config::GmemStore gmem_store;
  auto store_slice = gmem_store.get_thread_slice(thread);
  Tensor tOsO = store_slice.partition_S(sO);
  Tensor tOrO = make_tensor<Element>(shape(tOsO));
  copy(gmem_store, tOsO, tOrO);
  Tensor tOgO = store_slice.partition_D(gO);
  store_rows(gmem_store, tOrO, tOgO, store_slice.partition_D(make_identity_tensor(BlockQ{})), rows);
}

}  // namespace dualkv::detail::sm80
