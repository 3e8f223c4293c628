// sm90a KV-major backward kernel for head_dim 256: dK and dV of one 64-key tile of one KV head,
// and (atomic mode) the tile's contribution to dQ, with TMA loads, warp specialisation and wgmma.
// The consumer warpgroups split the head dimension (split_d_config.cuh says why and lists the GEMMs).
//
// Work: as kernel.cuh: CTA b = key tile b / Hk (host plan, heaviest first) of KV head b % Hk walks
// every (query tile, query head) step that sees its keys (QueryWalk, the G query heads of the KV
// head folded into one walk), so dK and dV stay in registers for the whole walk.
//
// Warp roles (kThreads = 128 + 256):
//   warpgroup 0: thread 0 walks the steps and issues every TMA load (K and V once, then per step
//     the Q tile with its LSE and the dO tile with its D: key_tile_common.cuh), keeping within a
//     step of the previous key tile's walk (walk_pacing.h), and writes beside each step's Q stage
//     the step after it with that step's dQ slot, which the consumers read during the step
//     instead of walking; setmaxnreg lowers its registers.
//   warpgroups 1 and 2, consumers: warpgroup w owns queries [32 w, 32 w + 32) of the step's S^T and
//     dP^T and columns [128 w, 128 w + 128) of dK, dV and dQ. Per step: S^T = K Q^T and
//     dP^T = V dO^T issued back to back (shared operands); once S^T is done the previous step's dK,
//     issued before it, is done too, and that step's Q and dO stages go back to the producer; P^T
//     from S^T while dP^T runs, to this step's shared buffer (16-bit, stmatrix: score_store.cuh),
//     a barrier of both warpgroups, and dV += P^T dO issued behind dP^T; then dS^T, to its
//     buffer, a second barrier (on boundary steps P^T and dS^T are masked before their stores);
//     then dQ = dS K (atomic mode) and dK += dS^T Q issued as two batches; once dQ is done its 64
//     values per thread go to the step's accumulator slot (dq_accumulator.h) as 16 vector
//     reductions (red.global.add.v4.f32: 4 consecutive values of a thread are 16 contiguous bytes
//     of a 64 x 64 block, a warp's 32 reductions one 512-byte run): 4 at once, while dK still runs
//     into the next step, and 12 held in registers until the next step's S^T and dP^T are issued
//     (HeldDqVectors). Deterministic mode: dV and dK only.
//
// Pipeline: K and V on one transaction barrier; Q+LSE and dO+D each through kStages buffers of
// CUTLASS's PipelineTmaAsync (full: TMA transaction bytes; empty: every consumer thread). P^T and
// dS^T alternate between two buffers: a warpgroup writes buffer b at step i + 2 only after passing
// step i + 1's P^T barrier, which the other warpgroup reaches only after its step-i GEMMs (the
// last readers of b) are done (it waits for them at step i + 1's S^T).
//
// Rows outside the walk's queries and keys past the tile's segment: as kernel.cuh (zero_rows.cuh):
// K rows past the segment (contracted by dQ) and, on boundary steps, Q and dO rows outside the
// step's queries (contracted by dK, dV) are zeroed in shared memory; P and dS there are set to 0;
// their dQ rows go into a slot the convert pass reads only for the step's own queries.
//
// Shared memory (split_d_config.cuh): K, V (64 x 256) | Q, dO kStages x (64 x 256) | P^T, dS^T
// kStages x (64 x 64) | LSE x log2(e), D kStages x (64 + 4) fp32 | handed steps kStages x 40 B,
// the producer's walk and segment cursor | barriers: 225 KiB.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/tensor.hpp>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/query_walk.h"
#include "cuda/common/softmax_backward.cuh"
#include "cuda/sm90/backward/dq_accumulator.h"
#include "cuda/sm90/backward/key_tile_common.cuh"
#include "cuda/sm90/backward/score_store.cuh"
#include "cuda/sm90/backward/split_d_config.cuh"
#include "cuda/sm90/backward/zero_rows.cuh"
#include "cuda/sm90/common/fragments.cuh"

namespace dualkv::detail::sm90 {

// Named barriers of the consumer warpgroups (beyond CUTLASS's reserved ones).
enum SplitDimBarrier : uint32_t {
  kSplitDimRowsZeroed = 0,            // rows zeroed, visible to the async proxy
  kSplitDimProbabilitiesWritten = 1,  // the step's P^T is in shared memory
  kSplitDimScoresWritten = 2,         // the step's dS^T is in shared memory
};

// This thread's dQ values of warpgroup `warpgroup` in `slot` of `head` as vector reductions: values
// [4 j, 4 j + 4) of the 64 x 128 accumulator (unscaled: the convert pass applies the softmax scale)
// are 16 contiguous bytes at vectors + 512 j. Block 2 warpgroup + b of the slot holds values
// [32 b, 32 b + 32) in the block's register order (dq_fragment_offset), and the two blocks of a
// warpgroup are adjacent, so vector j of either block is 512 j floats from the first.
template <typename Config>
__device__ __forceinline__ float* dq_vectors(const BackwardTmaParams& params, int head, int64_t slot, int warpgroup,
                                             int warpgroup_thread) {
  constexpr int kBlocksPerWarpgroup = Config::kColumnsPerWarpgroup / 64;
  static_assert(dq_fragment_offset(0, 4) == 512 && dq_fragment_offset(0, 3) == 3 && kDqBlockFloats == 8 * 512);
  return params.base.dq_accum +
         dq_block_offset(head, params.dq_accum_head_stride, slot, Config::kBlockM, Config::kHeadDim,
                         kBlocksPerWarpgroup * warpgroup) +
         dq_fragment_offset(warpgroup_thread, 0);
}

// Adds vectors [kFirst, kEnd) of `values` (value(v) for v in [4 kFirst, 4 kEnd)) at `vectors`.
template <int kFirst, int kEnd, typename Values>
__device__ __forceinline__ void reduce_dq_vectors(float* vectors, const Values& value) {
  CUTE_UNROLL
  for (int j = kFirst; j < kEnd; ++j) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(vectors + 512 * j), "f"(value(4 * j)),
                 "f"(value(4 * j + 1)), "f"(value(4 * j + 2)), "f"(value(4 * j + 3))
                 : "memory");
  }
}

// The last kHeld of a step's kVectors dQ reductions per thread, held in registers until the next
// step's S^T and dP^T are issued. Sent as soon as dQ completes, all 16 reductions of every
// consumer thread fill the LSU's global queue at once (LG-throttle stalls, 15% of the consumers'
// cycles) in front of the loop tail's walk loads and the next step's issue; held back, they drain
// while the tensor pipe runs S^T and dP^T. How many to hold was measured (performance.md): 12
// (48 registers beside dK, dV, S^T and dP^T, no spills) is the fastest; 4 and 8 were slower at
// some shapes, and holding all 16 was 4-6% slower, with 1.7x the DRAM traffic.
template <int kVectors, int kHeld>
struct HeldDqVectors {
  static constexpr int kSentAtOnce = kVectors - kHeld;
  cute::array<float, 4 * kHeld> values;
  float* vectors;

  // Before the first step nothing is held, yet the loop sends what is held unconditionally: a
  // branch around the reductions makes ptxas serialise every wgmma of the loop (C7518), and so
  // does a predicate on them (ptxas turns it into a branch). So the first send adds zeros at
  // `harmless`, a real slot: an exact no-op, as the accumulator starts at +0.0 and no sum of
  // floats turns +0.0 into -0.0.
  __device__ __forceinline__ explicit HeldDqVectors(float* harmless) : vectors(harmless) {
    CUTE_UNROLL
    for (int v = 0; v < 4 * kHeld; ++v) values[v] = 0.0f;
  }
  // The values are copied by adding +0.0 (exact here, as above) rather than moved: ptxas would keep
  // them in the registers the dQ wgmma defined and, unable to prove across the loop's back edge
  // that the wgmma is complete, wait for every wgmma in flight before sending them (C7517).
  template <typename Accumulator>
  __device__ __forceinline__ void send_and_hold(float* step_vectors, const Accumulator& acc) {
    reduce_dq_vectors<0, kSentAtOnce>(step_vectors, [&](int v) { return acc(v); });
    CUTE_UNROLL
    for (int v = 0; v < 4 * kHeld; ++v) values[v] = acc(4 * kSentAtOnce + v) + 0.0f;
    vectors = step_vectors;
  }
  __device__ __forceinline__ void send_held() const {
    reduce_dq_vectors<kSentAtOnce, kVectors>(vectors, [&](int v) { return values[v - 4 * kSentAtOnce]; });
  }
};

template <typename Config, bool kAccumulateDq>
__device__ void consume_split_dim_backward(const BackwardTmaParams& params, typename Config::SharedStorage& shared,
                                           typename Config::Pipeline& q_pipeline,
                                           typename Config::Pipeline& do_pipeline) {
  using namespace cute;
  using Element = typename Config::Element;
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  constexpr int kHeadDim = Config::kHeadDim;
  const BackwardKernelParams& p = params.base;
  const int thread = static_cast<int>(threadIdx.x) - 128;  // among the consumers
  const int warpgroup = thread / 128;
  const int warpgroup_thread = thread % 128;
  const KeyTileWork work(p, kBlockN);
  const int key_begin = work.tile.begin;

  Tensor sK = make_tensor(make_smem_ptr(shared.k), typename Config::SmemLayoutKey{});
  Tensor sV = make_tensor(make_smem_ptr(shared.v), typename Config::SmemLayoutKey{});
  Tensor sKt = make_tensor(make_smem_ptr(shared.k), typename Config::SmemLayoutKeyT{});
  Tensor sQ = make_tensor(make_smem_ptr(shared.q), typename Config::SmemLayoutQuery{});
  Tensor sdO = make_tensor(make_smem_ptr(shared.dout), typename Config::SmemLayoutQuery{});
  Tensor sQt = make_tensor(make_smem_ptr(shared.q), typename Config::SmemLayoutQueryT{});
  Tensor sdOt = make_tensor(make_smem_ptr(shared.dout), typename Config::SmemLayoutQueryT{});
  Tensor sPt = make_tensor(make_smem_ptr(shared.p), typename Config::SmemLayoutScoresT{});
  Tensor sdSt = make_tensor(make_smem_ptr(shared.ds), typename Config::SmemLayoutScoresT{});
  Tensor sdS = make_tensor(make_smem_ptr(shared.ds), typename Config::SmemLayoutScores{});

  typename Config::TiledMmaSdP mma_sdp;
  typename Config::TiledMmaKV mma_kv;
  typename Config::TiledMmaDq mma_dq;
  // Descriptors from the warpgroup's first thread (uniform registers): every operand is shared.
  auto operands_sdp = consumer_operand_slice(mma_sdp);
  auto operands_kv = consumer_operand_slice(mma_kv);
  auto operands_dq = consumer_operand_slice(mma_dq);
  Tensor tSrK = operands_sdp.partition_fragment_A(sK);
  Tensor tSrV = operands_sdp.partition_fragment_A(sV);
  Tensor tSrQ = operands_sdp.partition_fragment_B(sQ);
  Tensor tSrdO = operands_sdp.partition_fragment_B(sdO);
  Tensor tKVrP = operands_kv.partition_fragment_A(sPt);
  Tensor tKVrdS = operands_kv.partition_fragment_A(sdSt);
  Tensor tKVrdOt = operands_kv.partition_fragment_B(sdOt);
  Tensor tKVrQt = operands_kv.partition_fragment_B(sQt);
  Tensor tDqrdS = operands_dq.partition_fragment_A(sdS);
  Tensor tDqrKt = operands_dq.partition_fragment_B(sKt);

  const TransposedScoreStore<Config, typename Config::SmemLayoutScores> p_store(shared.p, thread);
  const TransposedScoreStore<Config, typename Config::SmemLayoutScores> ds_store(shared.ds, thread);
  const Tensor score_coords_rc = score_coordinates<Config>(mma_sdp, thread);

  Tensor acc_dk = partition_fragment_C(mma_kv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
  Tensor acc_dv = partition_fragment_C(mma_kv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
  clear(acc_dk);
  clear(acc_dv);

  auto& kv_full = *reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(&shared.kv_full);
  kv_full.wait(0);
  if (work.key_rows < kBlockN) {
    RowZeroer<Config, typename Config::SmemLayoutKey, kBlockN>::zero_outside(shared.k, 0, work.key_rows, thread);
    publish_to_consumers<Config>(kSplitDimRowsZeroed);
  }

  typename Config::Pipeline::PipelineState q_state, do_state;
  const float scale_log2 = p.softmax_scale * kLog2E;
  // The walk's first step and its dQ slot, computed here once; every later one comes from the
  // producer with the stage of the step before it (HandedStepAndDqSlot), so the loop reads no
  // global memory but the dQ reductions.
  QueryStep step =
      QueryWalk::of_key_tile(p.cu_seqlens, p.runs, work.tile, work.kv_head, p.heads / p.kv_heads, kBlockM).first;
  int64_t slot = 0;
  if constexpr (kAccumulateDq) {
    SegmentCursor tile_segments{p.cu_seqlens};
    slot = dq_step_slot(step, work.tile, p.runs, tile_segments, dq_tail_slots_begin(p.tokens, p.num_segments, kBlockM),
                        kBlockM);
  }
  int scores_stage = 0;
  // A key tile's index is below the slot count (a segment has at most tokens / block_m + 1 tiles):
  // the first send's zeros go to that slot of the KV head's first query head.
  HeldDqVectors<Config::kColumnsPerWarpgroup * kBlockM / 128 / 4, 12> held_dq(dq_vectors<Config>(
      params, work.kv_head * (p.heads / p.kv_heads), blockIdx.x / p.kv_heads, warpgroup, warpgroup_thread));
  // The previous step's dK is still running when this step's S^T and dP^T are issued; its Q and
  // dO stages go back once S^T is seen complete.
  bool release_pending = false;
  typename Config::Pipeline::PipelineState q_release_state, do_release_state;
  for (;;) {
    const int query_rows = min(kBlockM, step.rows_end - step.begin);
    const int first_row = step.rows_begin - step.begin;
    const bool partial_step = query_rows < kBlockM || first_row > 0;
    q_pipeline.consumer_wait(q_state);
    if (partial_step) do_pipeline.consumer_wait(do_state);
    const int q_stage = q_state.index();
    const int do_stage = do_state.index();
    if (partial_step) {
      using QueryRows = RowZeroer<Config, typename Config::SmemLayoutQuery, kBlockM>;
      QueryRows::zero_outside(shared.q + q_stage * kBlockM * kHeadDim, first_row, query_rows, thread);
      QueryRows::zero_outside(shared.dout + do_stage * kBlockM * kHeadDim, first_row, query_rows, thread);
      publish_to_consumers<Config>(kSplitDimRowsZeroed);
    }

    Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor s_rc = make_tensor(acc_s.data(), accumulator_rows_by_columns(acc_s.layout()));
    Tensor dp_rc = make_tensor(acc_dp.data(), accumulator_rows_by_columns(acc_dp.layout()));
    const int stats_skip = step.begin & 3;  // stats_row starts up to 3 queries early
    const auto lse_log2 = query_stats<true, 1, decltype(s_rc)>(score_coords_rc, shared.lse_log2[q_stage] + stats_skip);
    warpgroup_gemm<true, -1>(mma_sdp, tSrK, tSrQ(_, _, _, q_stage), acc_s);
    if (!partial_step) do_pipeline.consumer_wait(do_state);
    warpgroup_gemm<true, -1>(mma_sdp, tSrV, tSrdO(_, _, _, do_stage), acc_dp);
    if constexpr (kAccumulateDq) held_dq.send_held();

    // The causal mask applies when the queries are in the key tile's own segment; it also hides a
    // response key tile's first step's rows of the previous response (they precede its keys).
    const bool causal = step.causal;
    const bool needs_mask =
        (causal && step.begin < key_begin + work.key_rows - 1) || query_rows < kBlockM || work.key_rows < kBlockN;
    const auto visible = [&](int n, int m) {
      return n < work.key_rows && m < query_rows && (!causal || key_begin + n <= step.begin + m);
    };
    warpgroup_wait<1>();
    warpgroup_fence_operand(acc_s);
    if (release_pending) {
      q_pipeline.consumer_release(q_release_state);
      do_pipeline.consumer_release(do_release_state);
    }
    softmax_probabilities<1>(s_rc, lse_log2, scale_log2);
    if (needs_mask) zero_invisible(s_rc, score_coords_rc, visible);
    p_store.store(convert_fragment<Element>(acc_s), scores_stage);
    publish_to_consumers<Config>(kSplitDimProbabilitiesWritten);
    // dV += P^T dO, queued behind dP^T: the tensor pipe runs it while dS is computed and stored,
    // where it would otherwise idle until the dS barrier.
    warpgroup_gemm<false, -1>(mma_kv, tKVrP(_, _, _, scores_stage), tKVrdOt(_, _, _, do_stage), acc_dv);
    const auto delta = query_stats<true, 1, decltype(s_rc)>(score_coords_rc, shared.delta[do_stage] + stats_skip);
    warpgroup_wait<1>();  // dP^T
    warpgroup_fence_operand(acc_dp);
    softmax_score_gradients<1>(s_rc, dp_rc, delta);
    if (needs_mask) zero_invisible(dp_rc, score_coords_rc, visible);
    ds_store.store(convert_fragment<Element>(acc_dp), scores_stage);
    publish_to_consumers<Config>(kSplitDimScoresWritten);
    // The next step, read where the fewest accumulators are live, a step before its stage lands
    // (and before this step's Q stage goes back, at the next step's S^T).
    const HandedStepAndDqSlot handed = shared.steps[q_stage];

    if constexpr (kAccumulateDq) {
      Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      warpgroup_gemm<true, -1>(mma_dq, tDqrdS(_, _, _, scores_stage), tDqrKt, acc_dq);
      warpgroup_gemm<false, 1>(mma_kv, tKVrdS(_, _, _, scores_stage), tKVrQt(_, _, _, q_stage), acc_dk);
      held_dq.send_and_hold(dq_vectors<Config>(params, step.head, slot, warpgroup, warpgroup_thread), acc_dq);
    } else {
      warpgroup_gemm<false, -1>(mma_kv, tKVrdS(_, _, _, scores_stage), tKVrQt(_, _, _, q_stage), acc_dk);
    }
    q_release_state = q_state;
    do_release_state = do_state;
    release_pending = true;
    ++q_state;
    ++do_state;
    scores_stage ^= 1;
    if (handed.step.last) break;
    step = handed.step.next;
    slot = handed.next_dq_slot;
  }
  warpgroup_wait<0>();
  if constexpr (kAccumulateDq) held_dq.send_held();
  if (release_pending) {
    q_pipeline.consumer_release(q_release_state);
    do_pipeline.consumer_release(do_release_state);
  }
  store_key_gradients<Config>(mma_kv, thread, acc_dk, acc_dv, p, work);
}

template <typename Config, bool kAccumulateDq>
__global__ void __launch_bounds__(Config::kThreads, 1)
    backward_split_dim_kernel(const __grid_constant__ BackwardTmaParams params) {
  extern __shared__ char shared_bytes[];
  run_backward_frame<Config>(
      params, shared_bytes,
      [&](auto& shared, auto& q_pipeline, auto& do_pipeline) {
        consume_split_dim_backward<Config, kAccumulateDq>(params, shared, q_pipeline, do_pipeline);
      },
      [](auto& /*shared*/) {});
}

}  // namespace dualkv::detail::sm90
