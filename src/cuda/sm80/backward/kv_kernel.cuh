// KV-major backward kernel (sm80+): dK and dV of one key tile of one KV head, and (atomic mode)
// that tile's contribution to dQ.
//
// Work item: blockIdx.x = key tile * Hk + kv head, key tiles heaviest first (host plan). The CTA
// walks every (query tile, query head) pair that sees the key tile (QueryWalk: its segment's query
// tiles from the key tile on, then every query tile of its descendants; two-level layouts: a
// prompt key tile's walk goes on over every response, a response key tile's stays in its
// response) -- so dK and dV live in fp32 registers for the whole walk: no expanded GQA buffers and
// no dK/dV atomics.
//
// Warp roles: kKvWarps warps (the shape's kv_warps) in one (kKvWarps / 2 x 2) grid for
// S^T = K Q^T and dP^T = V dO^T (key x query), then dV += P^T dO and dK += dS^T Q (key x d);
// (atomic mode) dQ = dS K (query x d) on a (2 x kKvWarps / 2) grid, whose 32 x 32 warp tiles suit
// its kQueryBlock rows. P^T and dS^T pass through shared memory between the GEMMs, so no warp
// needs a whole head_dim-wide operand slice in registers. Each thread holds
// 2 * kKeyBlock * kHeadDim / kKvThreads fp32 dK/dV values: 128 at head_dim 128 (128 keys, 8 warps)
// and 256 (64 keys, 8 warps; 32 keys, 4 warps), 64 at head_dim 64.
//
// Pipeline: K, V are loaded once; Q, dO, LSE and D of the next (query tile, head) are fetched
// with cp.async while the current one is computed: with two stages into the other stage at the
// start of a step; with one stage (the shape for 99 KiB GPUs) once the dV and dK GEMMs have read
// the current Q and dO, overlapping the dQ GEMM and its reductions.
//
// Shared memory: K, V [kKeyBlock x d]; Q, dO [stages][kQueryBlock x d]; P^T, dS^T
// [kKeyBlock x kQueryBlock]; LSE, D [stages][kQueryBlock] fp32. 16-bit tiles use the 8x64
// Swizzle<3,3,3> atom (8x32 Swizzle<2,3,3> for 32-query score tiles). Per shape of tile_shapes.h
// (head_dim: keys x queries, stages): 64: 128 x 64, 2: 97 KiB; 128: 128 x 64, 2: 161 KiB, or
// 128 x 32, 1: 96.3 KiB; 256: 64 x 64, 1: 144.5 KiB, or 32 x 32, 1: 68.3 KiB.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/query_walk.h"
#include "cuda/common/softmax_backward.cuh"
#include "cuda/sm80/backward/atomic_add_pair.cuh"
#include "cuda/sm80/backward/kernel_traits.cuh"
#include "cuda/sm80/mma.cuh"
#include "cuda/sm80/tile_io.cuh"

namespace dualkv::detail::sm80 {

using namespace cute;

template <typename Traits>
struct KvSharedStorage {
  using Element = typename Traits::Element;
  static constexpr int kKeyElems = Traits::kKeyBlock * Traits::kHeadDim;
  static constexpr int kQueryElems = Traits::kQueryBlock * Traits::kHeadDim;
  alignas(128) Element k[kKeyElems];
  alignas(128) Element v[kKeyElems];
  alignas(128) Element q[Traits::kQueryStages][kQueryElems];
  alignas(128) Element dout[Traits::kQueryStages][kQueryElems];
  alignas(128) Element p_t[Traits::kKeyBlock * Traits::kQueryBlock];
  alignas(128) Element ds_t[Traits::kKeyBlock * Traits::kQueryBlock];
  alignas(16) float lse[Traits::kQueryStages][Traits::kQueryBlock];
  alignas(16) float delta[Traits::kQueryStages][Traits::kQueryBlock];
};

template <typename Traits, bool kAccumulateDq>
__global__ void __launch_bounds__(Traits::kKvThreads, 1) backward_kv_kernel(const BackwardKernelParams p) {
  using Element = typename Traits::Element;
  constexpr int kN = Traits::kKeyBlock;
  constexpr int kM = Traits::kQueryBlock;
  constexpr int kD = Traits::kHeadDim;
  constexpr bool kDoubleBuffered = Traits::kQueryStages == 2;
  using Storage = KvSharedStorage<Traits>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  Storage& smem = *reinterpret_cast<Storage*>(shared_bytes);
  const int tid = threadIdx.x;

  // ---- work item ----
  const int kv_head = blockIdx.x % p.kv_heads;
  const TileWork tile = p.key_tiles[blockIdx.x / p.kv_heads];
  const int key_begin = tile.begin;
  const int key_rows = min(kN, p.cu_seqlens[tile.segment + 1] - key_begin);
  const QueryWalk walk = QueryWalk::of_key_tile(p.cu_seqlens, p.runs, tile, kv_head, p.heads / p.kv_heads, kM);
  QueryStep step = walk.first;

  // ---- loads ----
  typename Traits::KvTileCopy tile_copy;
  const auto* k_base = static_cast<const Element*>(p.k.data) + key_begin * p.k.token_stride + kv_head * p.k.head_stride;
  const auto* v_base = static_cast<const Element*>(p.v.data) + key_begin * p.v.token_stride + kv_head * p.v.head_stride;
  Tensor sK = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemKey{});
  Tensor sV = make_tensor(make_smem_ptr(smem.v), typename Traits::SmemKey{});
  copy_rows_async(tile_copy, global_rows<kN, kD>(k_base, p.k.token_stride), sK, key_rows);
  copy_rows_async(tile_copy, global_rows<kN, kD>(v_base, p.v.token_stride), sV, key_rows);
  cp_async_fence();

  auto load_step = [&](const QueryStep& s, int stage) {
    const int rows = s.rows_end - s.begin;
    const int first_row = s.rows_begin - s.begin;
    const auto* q_base =
        static_cast<const Element*>(p.q.data) + int64_t{s.begin} * p.q.token_stride + s.head * p.q.head_stride;
    const auto* do_base =
        static_cast<const Element*>(p.dout.data) + int64_t{s.begin} * p.dout.token_stride + s.head * p.dout.head_stride;
    Tensor sQ = make_tensor(make_smem_ptr(smem.q[stage]), typename Traits::SmemQuery{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.dout[stage]), typename Traits::SmemQuery{});
    copy_rows_async(tile_copy, global_rows<kM, kD>(q_base, p.q.token_stride), sQ, rows, first_row);
    copy_rows_async(tile_copy, global_rows<kM, kD>(do_base, p.dout.token_stride), sdO, rows, first_row);
    if (tid < kM) {
      const float* lse = p.lse + s.head * p.lse_head_stride + s.begin + tid;
      copy_float_async(&smem.lse[stage][tid], tid < rows ? lse : p.lse, tid < rows);
    } else if (tid < 2 * kM) {
      const int row = tid - kM;
      const float* delta = p.delta + s.head * p.stats_row_stride + s.begin + row;
      copy_float_async(&smem.delta[stage][row], row < rows ? delta : p.delta, row < rows);
    }
  };

  // ---- MMA setup ----
  typename Traits::KvMma mma;
  auto thr_mma = mma.get_thread_slice(tid);
  auto load_a = make_tiled_copy_A(typename Traits::LoadA{}, mma);
  auto load_b = make_tiled_copy_B(typename Traits::LoadA{}, mma);
  auto load_b_transposed = make_tiled_copy_B(typename Traits::LoadTransposed{}, mma);

  typename Traits::KvDqMma dq_mma;
  auto dq_thr_mma = dq_mma.get_thread_slice(tid);
  auto load_ds_transposed = make_tiled_copy_A(typename Traits::LoadTransposed{}, dq_mma);
  auto load_key_transposed = make_tiled_copy_B(typename Traits::LoadTransposed{}, dq_mma);
  auto store_score = make_tiled_copy_C(typename Traits::StorePair{}, mma);
  auto thr_store = store_score.get_thread_slice(tid);

  Tensor tSsK = load_a.get_thread_slice(tid).partition_S(sK);
  Tensor tSsV = load_a.get_thread_slice(tid).partition_S(sV);
  Tensor tSrK = thr_mma.partition_fragment_A(sK);
  Tensor sPt = make_tensor(make_smem_ptr(smem.p_t), typename Traits::SmemScoreT{});
  Tensor sdSt = make_tensor(make_smem_ptr(smem.ds_t), typename Traits::SmemScoreT{});
  Tensor tGrA = thr_mma.partition_fragment_A(sPt);

  Tensor acc_dk = partition_fragment_C(mma, Shape<Int<kN>, Int<kD>>{});
  Tensor acc_dv = partition_fragment_C(mma, Shape<Int<kN>, Int<kD>>{});
  clear(acc_dk);
  clear(acc_dv);
  Tensor score_coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<kN>, Int<kM>>{}));
  Tensor score_coords_rc = make_tensor(score_coords.data(), accumulator_rows_by_columns(score_coords.layout()));

  const float scale_log2 = p.softmax_scale * kLog2E;
  int stage = 0;
  load_step(step, stage);
  cp_async_fence();

  while (true) {
    QueryStep next = step;
    walk.advance(next);
    const bool has_next = !walk.done(next);
    if constexpr (kDoubleBuffered) {
      if (has_next) load_step(next, stage ^ 1);
      cp_async_fence();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    Tensor sQ = make_tensor(make_smem_ptr(smem.q[stage]), typename Traits::SmemQuery{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.dout[stage]), typename Traits::SmemQuery{});
    Tensor sQt = make_tensor(make_smem_ptr(smem.q[stage]), typename Traits::SmemQueryT{});
    Tensor sdOt = make_tensor(make_smem_ptr(smem.dout[stage]), typename Traits::SmemQueryT{});
    Tensor sQtFlat = make_tensor(make_smem_ptr(smem.q[stage]), get_nonswizzle_portion(typename Traits::SmemQueryT{}));

    // S^T = K Q^T and dP^T = V dO^T, (key, query).
    Tensor acc_s = partition_fragment_C(mma, Shape<Int<kN>, Int<kM>>{});
    Tensor acc_dp = partition_fragment_C(mma, Shape<Int<kN>, Int<kM>>{});
    clear(acc_s);
    clear(acc_dp);
    {
      Tensor tSrQ = thr_mma.partition_fragment_B(sQ);
      Tensor tSsQ = load_b.get_thread_slice(tid).partition_S(sQ);
      gemm_from_shared(mma, acc_s, tSrK, tSrQ, tSsK, tSsQ, load_a, load_b);
      Tensor tSsdO = load_b.get_thread_slice(tid).partition_S(sdO);
      gemm_from_shared(mma, acc_dp, tSrK, tSrQ, tSsV, tSsdO, load_a, load_b);
    }

    // P^T = exp(scale * S^T - LSE) and dS^T = P^T * (dP^T - D), masked. The causal mask applies
    // when the queries are in the key tile's own segment; it also hides a response key tile's
    // first step's rows of the previous response (they precede its keys).
    const bool causal = step.causal;
    const int query_rows = step.rows_end - step.begin;
    const int first_row = step.rows_begin - step.begin;
    const bool needs_mask = (causal && step.begin < key_begin + key_rows - 1) || query_rows < kM || key_rows < kN;
    const auto visible = [&](int n, int m) {
      return n < key_rows && m < query_rows && (!causal || key_begin + n <= step.begin + m);
    };
    Tensor s_rc = make_tensor(acc_s.data(), accumulator_rows_by_columns(acc_s.layout()));
    Tensor ds_rc = make_tensor(acc_dp.data(), accumulator_rows_by_columns(acc_dp.layout()));
    if (needs_mask) {
      softmax_backward<true, 1>(s_rc, ds_rc, score_coords_rc, smem.lse[stage], smem.delta[stage], scale_log2, visible);
    } else {
      softmax_backward<false, 1>(s_rc, ds_rc, score_coords_rc, smem.lse[stage], smem.delta[stage], scale_log2, visible);
    }
    copy(store_score, thr_store.retile_S(convert_fragment<Element>(acc_s)), thr_store.partition_D(sPt));
    copy(store_score, thr_store.retile_S(convert_fragment<Element>(acc_dp)), thr_store.partition_D(sdSt));
    __syncthreads();

    // dV += P^T dO and dK += dS^T Q, B operands read transposed from the (query, d) tiles.
    {
      Tensor tBr = thr_mma.partition_fragment_B(sQtFlat);
      auto load_b_slice = load_b_transposed.get_thread_slice(tid);
      gemm_from_shared(mma, acc_dv, tGrA, tBr, load_a.get_thread_slice(tid).partition_S(sPt),
                       load_b_slice.partition_S(sdOt), load_a, load_b_transposed);
      gemm_from_shared(mma, acc_dk, tGrA, tBr, load_a.get_thread_slice(tid).partition_S(sdSt),
                       load_b_slice.partition_S(sQt), load_a, load_b_transposed);
    }
    if constexpr (!kDoubleBuffered) {
      __syncthreads();  // every warp has read Q, dO, LSE and D: the next step's loads may land
      if (has_next) load_step(next, stage);
      cp_async_fence();
    }

    if constexpr (kAccumulateDq) {
      // dQ += scale * dS K, dS read transposed from the stored dS^T.
      Tensor sdS = make_tensor(make_smem_ptr(smem.ds_t), typename Traits::SmemScore{});
      Tensor sdSFlat = make_tensor(make_smem_ptr(smem.ds_t), get_nonswizzle_portion(typename Traits::SmemScore{}));
      Tensor sKt = make_tensor(make_smem_ptr(smem.k), typename Traits::SmemKeyT{});
      Tensor sKtFlat = make_tensor(make_smem_ptr(smem.k), get_nonswizzle_portion(typename Traits::SmemKeyT{}));
      Tensor acc_dq = partition_fragment_C(dq_mma, Shape<Int<kM>, Int<kD>>{});
      clear(acc_dq);
      Tensor tArdS = dq_thr_mma.partition_fragment_A(sdSFlat);
      Tensor tBrK = dq_thr_mma.partition_fragment_B(sKtFlat);
      gemm_from_shared(dq_mma, acc_dq, tArdS, tBrK, load_ds_transposed.get_thread_slice(tid).partition_S(sdS),
                       load_key_transposed.get_thread_slice(tid).partition_S(sKt), load_ds_transposed,
                       load_key_transposed);
      // The accumulator is head-major, (H, T, d), so this (query tile, head) block is kM
      // contiguous rows of kD floats: a fully static layout, and every reduction of the thread
      // addresses one base register plus an immediate. With token-major rows the row stride was
      // a runtime value; the compiler rebuilt each row's 64-bit address in the registers that
      // the previous row's in-flight reductions still held, and waited for them (ncu: 8.7% of
      // the kernel's stall samples on those address instructions).
      float* dq_tile = p.dq_accum + (int64_t{step.head} * p.tokens + step.begin) * kD;
      Tensor gdQ = make_tensor(make_gmem_ptr(dq_tile), Shape<Int<kM>, Int<kD>>{}, Stride<Int<kD>, _1>{});
      Tensor dq_target = dq_thr_mma.partition_C(gdQ);
      Tensor dq_target_rc = make_tensor(dq_target.data(), accumulator_rows_by_columns(dq_target.layout()));
      Tensor dq_coords = dq_thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kD>>{}));
      Tensor dq_rc = make_tensor(acc_dq.data(), accumulator_rows_by_columns(acc_dq.layout()));
      Tensor dq_coords_rc = make_tensor(dq_coords.data(), accumulator_rows_by_columns(dq_coords.layout()));
      // Columns c and c + 1 are adjacent (accumulator_rows_cols), and c is even, so each pair is
      // 8-byte aligned.
      const auto reduce_row = [&](int r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(dq_rc); c += 2) {
          atomic_add_pair(&dq_target_rc(r, c), dq_rc(r, c) * p.softmax_scale, dq_rc(r, c + 1) * p.softmax_scale);
        }
      };
      // A full tile (query_rows counts to the run's end) takes no row checks: one branch-free
      // block, so the address is formed once and not again in registers the earlier reductions
      // still hold. Rows outside the step's queries get nothing: they may be another response's,
      // and 0 * a NaN key of this tile would poison them.
      if (query_rows >= kM && first_row == 0) {
        CUTE_UNROLL
        for (int r = 0; r < size<0>(dq_rc); ++r) reduce_row(r);
      } else {
        CUTE_UNROLL
        for (int r = 0; r < size<0>(dq_rc); ++r) {
          const int row = get<0>(dq_coords_rc(r, 0));
          if (row >= first_row && row < query_rows) reduce_row(r);
        }
      }
    }
    // Two stages: the next step's prefetch, issued before its first barrier, overwrites this
    // stage. One stage: the next step's first barrier already orders its P^T / dS^T stores
    // after this step's reads.
    if constexpr (kDoubleBuffered) __syncthreads();
    if (!has_next) break;
    step = next;
    if constexpr (kDoubleBuffered) stage ^= 1;
  }

  // ---- epilogue: dK = scale * sum dS^T Q, dV = sum P^T dO ----
  Tensor out_coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<kN>, Int<kD>>{}));
  auto* dk = static_cast<Element*>(p.dk.data) + key_begin * p.dk.token_stride + kv_head * p.dk.head_stride;
  auto* dv = static_cast<Element*>(p.dv.data) + key_begin * p.dv.token_stride + kv_head * p.dv.head_stride;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); ++i) {
    const int n = get<0>(out_coords(i));
    const int c = get<1>(out_coords(i));
    if (n < key_rows) {
      dk[n * p.dk.token_stride + c] = static_cast<Element>(acc_dk(i) * p.softmax_scale);
      dv[n * p.dv.token_stride + c] = static_cast<Element>(acc_dv(i));
    }
  }
}

}  // namespace dualkv::detail::sm80
