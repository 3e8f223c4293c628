// Query-major dQ kernel of the deterministic backward (sm80+): recomputes P and dP for one query
// tile of one query head and writes dQ directly, with a fixed reduction order and no atomics.
//
// Work item: blockIdx.x = query tile * H + head, query tiles heaviest first (host plan: the
// forward's, host/query_plan.h). Key ranges, walked in tiles of kDqKeyBlock (KeyBlockWalk): the
// tile's ancestors (unmasked but past a range's end; two-level layouts: a response tile's prompt)
// and then its own segment up to its last query (causal).
//
// Warp roles: kDqWarps warps, each owns 16 query rows of S = Q K^T, dP = dO V^T and
// dQ += dS K; dS feeds the last GEMM straight from registers. A thread holds 16 x d / 32 fp32 dQ
// values: 128 at head_dim 256, where the key steps shrink to 32 (16 on sm_86/sm_89) so that the
// scores and operands fit beside them.
//
// Pipeline: Q, dO, LSE and D are loaded once; K and V of the next key tile are fetched with
// cp.async into the other of two stages while the current one is computed.
//
// Shared memory: Q, dO [kDqQueryBlock x d]; K, V [2 stages][kDqKeyBlock x d]; LSE, D
// [kDqQueryBlock] fp32. 16-bit tiles use the 8x64 Swizzle<3,3,3> atom. Per shape of tile_shapes.h
// (head_dim: queries x keys): 64: 64 x 64, 48.5 KiB; 128: 64 x 64, 96.5 KiB; 256: 64 x 32,
// 128.5 KiB, or 64 x 16, 96.5 KiB.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/key_block_walk.h"
#include "cuda/common/softmax_backward.cuh"
#include "cuda/sm80/backward/kernel_traits.cuh"
#include "cuda/sm80/mma.cuh"
#include "cuda/sm80/tile_io.cuh"

namespace dualkv::detail::sm80 {

using namespace cute;

template <typename Traits>
struct DqSharedStorage {
  using Element = typename Traits::Element;
  static constexpr int kQueryElems = Traits::kDqQueryBlock * Traits::kHeadDim;
  static constexpr int kKeyElems = Traits::kDqKeyBlock * Traits::kHeadDim;
  alignas(128) Element q[kQueryElems];
  alignas(128) Element dout[kQueryElems];
  alignas(128) Element k[2][kKeyElems];
  alignas(128) Element v[2][kKeyElems];
  alignas(16) float lse[Traits::kDqQueryBlock];
  alignas(16) float delta[Traits::kDqQueryBlock];
};

template <typename Traits>
__global__ void __launch_bounds__(Traits::kDqThreads) backward_dq_kernel(const BackwardKernelParams p) {
  using Element = typename Traits::Element;
  constexpr int kM = Traits::kDqQueryBlock;
  constexpr int kN = Traits::kDqKeyBlock;
  constexpr int kD = Traits::kHeadDim;
  using Storage = DqSharedStorage<Traits>;
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  Storage& smem = *reinterpret_cast<Storage*>(shared_bytes);
  const int tid = threadIdx.x;

  // ---- work item ----
  const int head = blockIdx.x % p.heads;
  const int kv_head = head / (p.heads / p.kv_heads);
  const QueryTile tile = p.query_tiles[blockIdx.x / p.heads];
  const int query_begin = tile.q_begin;
  const int query_rows = tile.q_end - tile.q_begin;
  using Walk = KeyBlockWalk<kN>;
  Walk step(tile, p.query_key_ranges);

  // ---- loads ----
  typename Traits::DqTileCopy tile_copy;
  Tensor sQ = make_tensor(make_smem_ptr(smem.q), typename Traits::DqSmemQuery{});
  Tensor sdO = make_tensor(make_smem_ptr(smem.dout), typename Traits::DqSmemQuery{});
  {
    const auto* q_base =
        static_cast<const Element*>(p.q.data) + int64_t{query_begin} * p.q.token_stride + head * p.q.head_stride;
    const auto* do_base = static_cast<const Element*>(p.dout.data) + int64_t{query_begin} * p.dout.token_stride +
                          head * p.dout.head_stride;
    copy_rows_async(tile_copy, global_rows<kM, kD>(q_base, p.q.token_stride), sQ, query_rows);
    copy_rows_async(tile_copy, global_rows<kM, kD>(do_base, p.dout.token_stride), sdO, query_rows);
    if (tid < kM) {
      const float* lse = p.lse + head * p.lse_head_stride + query_begin + tid;
      copy_float_async(&smem.lse[tid], tid < query_rows ? lse : p.lse, tid < query_rows);
      const float* delta = p.delta + head * p.stats_row_stride + query_begin + tid;
      copy_float_async(&smem.delta[tid], tid < query_rows ? delta : p.delta, tid < query_rows);
    }
    cp_async_fence();
  }
  auto load_step = [&](const Walk& s, int stage) {
    const int rows = s.range_end() - s.key_begin();
    const auto* k_base =
        static_cast<const Element*>(p.k.data) + int64_t{s.key_begin()} * p.k.token_stride + kv_head * p.k.head_stride;
    const auto* v_base =
        static_cast<const Element*>(p.v.data) + int64_t{s.key_begin()} * p.v.token_stride + kv_head * p.v.head_stride;
    Tensor sK = make_tensor(make_smem_ptr(smem.k[stage]), typename Traits::DqSmemKey{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v[stage]), typename Traits::DqSmemKey{});
    copy_rows_async(tile_copy, global_rows<kN, kD>(k_base, p.k.token_stride), sK, rows);
    copy_rows_async(tile_copy, global_rows<kN, kD>(v_base, p.v.token_stride), sV, rows);
  };

  // ---- MMA setup ----
  typename Traits::DqMma mma;
  auto thr_mma = mma.get_thread_slice(tid);
  auto load_a = make_tiled_copy_A(typename Traits::LoadA{}, mma);
  auto load_b = make_tiled_copy_B(typename Traits::LoadA{}, mma);
  auto load_b_transposed = make_tiled_copy_B(typename Traits::LoadTransposed{}, mma);
  Tensor tSsQ = load_a.get_thread_slice(tid).partition_S(sQ);
  Tensor tSsdO = load_a.get_thread_slice(tid).partition_S(sdO);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);
  Tensor acc_dq = partition_fragment_C(mma, Shape<Int<kM>, Int<kD>>{});
  clear(acc_dq);
  Tensor score_coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kN>>{}));
  Tensor score_coords_rc = make_tensor(score_coords.data(), accumulator_rows_by_columns(score_coords.layout()));
  const float scale_log2 = p.softmax_scale * kLog2E;

  int stage = 0;
  load_step(step, stage);
  cp_async_fence();
  while (true) {
    Walk next = step;
    next.advance();
    const bool has_next = !next.done();
    if (has_next) load_step(next, stage ^ 1);
    cp_async_fence();
    cp_async_wait<1>();
    __syncthreads();

    Tensor sK = make_tensor(make_smem_ptr(smem.k[stage]), typename Traits::DqSmemKey{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v[stage]), typename Traits::DqSmemKey{});
    Tensor sKt = make_tensor(make_smem_ptr(smem.k[stage]), typename Traits::DqSmemKeyT{});
    Tensor sKtFlat = make_tensor(make_smem_ptr(smem.k[stage]), get_nonswizzle_portion(typename Traits::DqSmemKeyT{}));

    // S = Q K^T and dP = dO V^T, (query, key).
    Tensor acc_s = partition_fragment_C(mma, Shape<Int<kM>, Int<kN>>{});
    Tensor acc_dp = partition_fragment_C(mma, Shape<Int<kM>, Int<kN>>{});
    clear(acc_s);
    clear(acc_dp);
    {
      Tensor tSrK = thr_mma.partition_fragment_B(sK);
      gemm_from_shared(mma, acc_s, tSrQ, tSrK, tSsQ, load_b.get_thread_slice(tid).partition_S(sK), load_a, load_b);
      gemm_from_shared(mma, acc_dp, tSrQ, tSrK, tSsdO, load_b.get_thread_slice(tid).partition_S(sV), load_a, load_b);
    }

    const int key_begin = step.key_begin();
    const bool causal = step.causal();
    const int key_rows = min(kN, step.range_end() - key_begin);
    const bool needs_mask = (causal && key_begin + kN - 1 > query_begin) || query_rows < kM || key_rows < kN;
    const auto visible = [&](int m, int n) {
      return n < key_rows && m < query_rows && (!causal || key_begin + n <= query_begin + m);
    };
    Tensor s_rc = make_tensor(acc_s.data(), accumulator_rows_by_columns(acc_s.layout()));
    Tensor ds_rc = make_tensor(acc_dp.data(), accumulator_rows_by_columns(acc_dp.layout()));
    if (needs_mask) {
      softmax_backward<true, 0>(s_rc, ds_rc, score_coords_rc, smem.lse, smem.delta, scale_log2, visible);
    } else {
      softmax_backward<false, 0>(s_rc, ds_rc, score_coords_rc, smem.lse, smem.delta, scale_log2, visible);
    }
    Tensor ds = convert_fragment<Element>(acc_dp);
    Tensor ds_a = make_tensor(ds.data(), accumulator_as_operand_a(ds.layout()));
    {
      Tensor tBrK = thr_mma.partition_fragment_B(sKtFlat);
      gemm_a_in_registers(mma, acc_dq, ds_a, tBrK, load_b_transposed.get_thread_slice(tid).partition_S(sKt),
                          load_b_transposed);
    }
    __syncthreads();  // the next prefetch overwrites this stage
    if (!has_next) break;
    step = next;
    stage ^= 1;
  }

  // ---- epilogue: dQ = scale * sum dS K ----
  Tensor out_coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<kM>, Int<kD>>{}));
  auto* dq = static_cast<Element*>(p.dq.data) + int64_t{query_begin} * p.dq.token_stride + head * p.dq.head_stride;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); ++i) {
    const int m = get<0>(out_coords(i));
    if (m < query_rows) {
      dq[m * p.dq.token_stride + get<1>(out_coords(i))] = static_cast<Element>(acc_dq(i) * p.softmax_scale);
    }
  }
}

}  // namespace dualkv::detail::sm80
