// sm90a KV-major backward kernel: dK and dV of one key tile of one KV head, and (atomic mode) the
// tile's contribution to dQ, with TMA loads, warp specialisation and wgmma.
//
// Work: CTA b = key tile b / Hk (host plan, heaviest first) of KV head b % Hk. It walks every
// (query tile, query head) step that sees its keys (QueryWalk: the G query heads of the KV head
// folded into one walk), so dK and dV stay in registers for the whole walk: no dK/dV atomics and
// no per-head copies.
//
// Warp roles (kThreads = 128 + 256):
//   warpgroup 0 (setmaxnreg lowers its registers):
//     thread 0, producer: walks the steps and issues every TMA load -- K and V once, then per step
//       the Q tile with its LSE and the dO tile with its D -- and writes beside each step's Q stage
//       the step after it, which the consumers read while the step's S^T runs instead of walking;
//     warp 1, the dQ warp (atomic mode): per step, one bulk reduction (cp.reduce.async.bulk
//       .add.f32, issued by lane 0) of each consumer warpgroup's staged dQ block into the step's
//       slot of the fp32 accumulator.
//   warpgroups 1 and 2, consumers: warpgroup w owns keys [64 (w - 1), 64 w) of the tile. Per step
//     (FA4's order): the step's LSE read, S^T = K Q^T issued once Q has landed and dP^T = V dO^T
//     right after, once dO has (wgmma, shared operands); P^T from S^T while dP^T still runs; dS^T
//     once it lands (a masking pass only on boundary steps); dV += P^T dO (wgmma, P^T straight
//     from registers). Atomic mode: dS^T to shared memory before dV is issued, one barrier of both
//     consumer warpgroups, dQ = dS K once dV is done (wgmma over all 128 keys, a 64 x 64 block per
//     warpgroup), dK += dS^T Q once dQ is done, and the dQ block handed to the dQ warp while dK
//     runs: 8 16-byte stores per thread into the warpgroup's staging buffer in the accumulator's
//     order (dq_accumulator.h), so the block is one contiguous 16 KiB. The reduction then leaves
//     the SM in the background, instead of as 8 `red.global` per consumer thread that the next
//     step's first instructions wait behind (docs/performance.md). dK is
//     not awaited: the next step's S^T and dP^T queue behind it (head_dim 128; with head_dim 64's
//     128-query steps it is awaited at the end of the step, for registers). Deterministic mode: dV
//     and dK only.
//
// Pipeline: K and V on one transaction barrier; Q+LSE and dO+D (TMA tile + bulk copy of the
// workspace's stats rows) each through kStages buffers of CUTLASS's PipelineTmaAsync (full: TMA
// transaction bytes; empty: every consumer thread), so the producer loads step i + 1 while step i
// computes. The dS buffers alternate between steps: a warpgroup writes buffer b at step i + 2 only
// after passing step i + 1's dS barrier, which the other warpgroup reaches only after its step-i
// dQ GEMM (the last reader of b) has completed.
// Each staging buffer passes between its warpgroup and the dQ warp through two named barriers:
// full (the block is stored and fenced for the async proxy) and empty (the bulk reduction that
// read it has finished reading).
//
// Query tiles lie on runs (QueryWalk; two-level layouts: a group's prompt, or all its responses
// together), so a key tile's steps over its descendants are full tiles across segment boundaries.
// Rows outside the walk's queries: TMA loads whole boxes, so a boundary tile holds rows of the next
// segment (possibly NaN), and a response key tile's first step may hold rows of the previous
// response. Their probabilities and score gradients are set (not multiplied) to 0, and rows that a
// GEMM contracts over are zeroed in shared memory first (zero_rows.cuh): K rows past the key tile's
// segment (contracted by dQ), Q and dO rows outside the step's queries (contracted by dK, dV). Their
// dQ rows (0 x K, NaN for a NaN key) go with the block into a slot the convert pass reads only for
// the step's own queries (dq_step_slot, dq_accumulator.h).
//
// Shared memory (config.cuh): K, V (block_n x d) | Q, dO kStages x (block_m x d) | dS kStages x
// (block_m x block_n) | dQ staging 2 x (64 x 64) fp32 | LSE x log2(e), D kStages x (block_m + 4)
// fp32 | handed steps kStages x 28 B, the producer's walk | barriers.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/query_walk.h"
#include "cuda/common/softmax_backward.cuh"
#include "cuda/sm90/backward/config.cuh"
#include "cuda/sm90/backward/dq_accumulator.h"
#include "cuda/sm90/backward/key_tile_common.cuh"
#include "cuda/sm90/backward/launch.h"
#include "cuda/sm90/backward/score_store.cuh"
#include "cuda/sm90/backward/zero_rows.cuh"
#include "cuda/sm90/common/fragments.cuh"
#include "cuda/sm90/common/hide_from_hoisting.cuh"
#include "cuda/sm90/common/tma_tile.cuh"
#include "cuda/sm90/common/warp_specialized.cuh"

namespace dualkv::detail::sm90 {

// Named barriers (beyond CUTLASS's reserved ones).
enum BackwardBarrier : uint32_t {
  kZeroedRowsBarrier = 0,  // both consumer warpgroups: rows zeroed, visible to the async proxy
  kDsWrittenBarrier = 1,   // both consumer warpgroups: the step's dS is in shared memory
  kDqEmptyBarrier = 2,     // + warpgroup, with the dQ warp: the staged block's last reduction has read it
  kDqFullBarrier = 4,      // + warpgroup, with the dQ warp: the staged block is in shared memory
};

// A consumer warpgroup and the dQ warp meet at the staged block's barriers.
constexpr uint32_t kDqHandoffThreads = 128 + 32;

// Stores a warpgroup's 64 x 64 dQ block (a wgmma accumulator, unscaled: the convert pass applies
// the softmax scale) to its staging buffer in the accumulator's order, value v of thread t at
// dq_fragment_offset(t, v): one 16-byte store per 4 consecutive values, a warp's 32 stores one
// contiguous 512-byte run (no bank conflict), so one bulk reduction moves the block.
template <typename Accumulator>
__device__ __forceinline__ void stage_dq_block(float* staged, const Accumulator& acc, int warpgroup_thread) {
  static_assert(decltype(cute::size(acc))::value == 32, "one 64 x 64 block per warpgroup");
  static_assert(dq_fragment_offset(0, 4) == 512 && dq_fragment_offset(0, 3) == 3);
  float* thread_values = staged + dq_fragment_offset(warpgroup_thread, 0);
  CUTE_UNROLL
  for (int i = 0; i < 8; ++i) {
    *reinterpret_cast<float4*>(thread_values + 512 * i) =
        make_float4(acc(4 * i), acc(4 * i + 1), acc(4 * i + 2), acc(4 * i + 3));
  }
}

// The dQ warp (atomic mode): per step, each consumer warpgroup's staged block goes to its place in
// the step's accumulator slot as one bulk reduction (cp.reduce.async.bulk .add.f32) issued by
// lane 0. Each staged block is handed back as soon as its own reduction has read it (bulk groups
// complete in order). Every block starts free; the last step's are not handed back (no consumer
// waits for them), so each barrier sees as many arrivals as waits.
// A block holds rows outside the step's queries (another response's, past a run's end) whose
// values may be NaN (0 x K for a NaN key of the tile); dq_step_slot picks a slot whose rows there
// nothing reads back (dq_accumulator.h), so the block goes out as the consumers staged it.
template <typename Config>
__device__ void reduce_staged_dq(const BackwardTmaParams& params, typename Config::SharedStorage& shared) {
  static_assert(Config::kConsumerWarpgroups == 2, "the hand-back counts pending groups of two blocks");
  const BackwardKernelParams& p = params.base;
  const KeyTileWork work(p, Config::kBlockN);
  const bool leader = threadIdx.x % 32 == 0;
  CUTE_UNROLL
  for (int warpgroup = 0; warpgroup < Config::kConsumerWarpgroups; ++warpgroup) {
    cutlass::arch::NamedBarrier::arrive(kDqHandoffThreads, kDqEmptyBarrier + warpgroup);
  }
  const QueryWalk walk =
      QueryWalk::of_key_tile(p.cu_seqlens, p.runs, work.tile, work.kv_head, p.heads / p.kv_heads, Config::kBlockM);
  SegmentCursor tile_segments{p.cu_seqlens};
  const int64_t tail_slots_begin = dq_tail_slots_begin(p.tokens, p.num_segments, Config::kBlockM);
  for (QueryStep step = walk.first; !walk.done(step);) {
    const int64_t slot = dq_step_slot(step, work.tile, p.runs, tile_segments, tail_slots_begin, Config::kBlockM);
    CUTE_UNROLL
    for (int warpgroup = 0; warpgroup < Config::kConsumerWarpgroups; ++warpgroup) {
      cutlass::arch::NamedBarrier::sync(kDqHandoffThreads, kDqFullBarrier + warpgroup);
      if (leader) {
        float* block = p.dq_accum + dq_block_offset(step.head, params.dq_accum_head_stride, slot, Config::kBlockM,
                                                    Config::kHeadDim, warpgroup);
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(block),
                     "r"(cute::cast_smem_ptr_to_uint(shared.dq_staged[warpgroup])), "r"(kStagedDqFloats * 4)
                     : "memory");
        cute::tma_store_arrive();
      }
    }
    walk.advance(step);
    const bool more = !walk.done(step);
    if (leader) cute::tma_store_wait<1>();
    __syncwarp();
    if (more) cutlass::arch::NamedBarrier::arrive(kDqHandoffThreads, kDqEmptyBarrier + 0);
    if (leader) cute::tma_store_wait<0>();
    __syncwarp();
    if (more) cutlass::arch::NamedBarrier::arrive(kDqHandoffThreads, kDqEmptyBarrier + 1);
  }
}

template <typename Config, bool kAccumulateDq>
__device__ void consume_backward(const BackwardTmaParams& params, typename Config::SharedStorage& shared,
                                 typename Config::Pipeline& q_pipeline, typename Config::Pipeline& do_pipeline) {
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
  Tensor sdS = make_tensor(make_smem_ptr(shared.ds), typename Config::SmemLayoutDs{});

  typename Config::TiledMmaSdP mma_sdp;
  typename Config::TiledMmaKV mma_kv;
  typename Config::TiledMmaDq mma_dq;
  // The slices that partition the shared-memory operands (config.cuh, kLeanIndexRegisters).
  const auto operand_slice = [&](const auto& mma) {
    if constexpr (Config::kLeanIndexRegisters) {
      return consumer_operand_slice(mma);
    } else {
      return mma.get_thread_slice(thread);
    }
  };
  auto operands_sdp = operand_slice(mma_sdp);
  auto operands_kv = operand_slice(mma_kv);
  auto operands_dq = operand_slice(mma_dq);
  Tensor tSrK = operands_sdp.partition_fragment_A(sK);
  Tensor tSrV = operands_sdp.partition_fragment_A(sV);
  Tensor tSrQ = operands_sdp.partition_fragment_B(sQ);
  Tensor tSrdO = operands_sdp.partition_fragment_B(sdO);
  Tensor tKVrQt = operands_kv.partition_fragment_B(sQt);
  Tensor tKVrdOt = operands_kv.partition_fragment_B(sdOt);
  Tensor tDqrdS = operands_dq.partition_fragment_A(sdS);
  Tensor tDqrKt = operands_dq.partition_fragment_B(sKt);
  const TransposedScoreStore<Config, typename Config::SmemLayoutDs> ds_store(shared.ds, thread);

  const Tensor score_coords_rc = score_coordinates<Config>(mma_sdp, thread);

  Tensor acc_dk = partition_fragment_C(mma_kv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
  Tensor acc_dv = partition_fragment_C(mma_kv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
  clear(acc_dk);
  clear(acc_dv);

  auto& kv_full = *reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(&shared.kv_full);
  kv_full.wait(0);
  if (work.key_rows < kBlockN) {
    RowZeroer<Config, typename Config::SmemLayoutKey, kBlockN>::zero_outside(shared.k, 0, work.key_rows, thread);
    publish_to_consumers<Config>(kZeroedRowsBarrier);
  }

  typename Config::Pipeline::PipelineState q_state, do_state;
  const float scale_log2 = p.softmax_scale * kLog2E;
  int ds_stage = 0;
  // Atomic mode: a step's dK GEMM still runs when the next step's S^T and dP^T are issued, so the
  // tensor pipe does not drain between steps; its Q stage goes back once S^T is seen complete.
  // Waiting for it at the end of its step (FA4's order) costs 3-6%, and waiting for it before dP^T
  // is issued 2-4% (docs/performance.md, "Tried and dropped"), though either frees the registers an
  // 80-query step would need.
  // With 128-query steps (head_dim 64) S^T and dP^T hold 64 + 64 accumulators per thread, which do
  // not fit beside dK's register operand: ptxas then serialises every wgmma (C7512), so there dK
  // is waited for at the end of its step.
  constexpr bool kDrainDkEachStep = kBlockM == 128;
  bool q_release_pending = false;
  typename Config::Pipeline::PipelineState q_release_state;
  // The walk's first step, computed here once; every later one comes from the producer with the
  // stage of the step before it (no walk here), so it is in registers when its own stage lands.
  QueryStep step =
      QueryWalk::of_key_tile(p.cu_seqlens, p.runs, work.tile, work.kv_head, p.heads / p.kv_heads, kBlockM).first;
  for (;;) {
    q_pipeline.consumer_wait(q_state);
    const int query_rows = min(kBlockM, step.rows_end - step.begin);
    const int first_row = step.rows_begin - step.begin;
    // dO is waited for only once S^T is issued (below), except on boundary steps, whose rows
    // outside the walk's queries are zeroed in both tiles first.
    const bool partial_step = query_rows < kBlockM || first_row > 0;
    if (partial_step) do_pipeline.consumer_wait(do_state);
    const int q_stage = q_state.index();
    const int do_stage = do_state.index();
    if (partial_step) {
      using QueryRows = RowZeroer<Config, typename Config::SmemLayoutQuery, kBlockM>;
      QueryRows::zero_outside(shared.q + q_stage * kBlockM * kHeadDim, first_row, query_rows, thread);
      QueryRows::zero_outside(shared.dout + do_stage * kBlockM * kHeadDim, first_row, query_rows, thread);
      publish_to_consumers<Config>(kZeroedRowsBarrier);
    }

    Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
    Tensor s_rc = make_tensor(acc_s.data(), accumulator_rows_by_columns(acc_s.layout()));
    Tensor dp_rc = make_tensor(acc_dp.data(), accumulator_rows_by_columns(acc_dp.layout()));
    const int stats_skip = step.begin & 3;  // stats_row starts up to 3 queries early
    // With 16 queries per thread (64-query steps) LSE and D go to registers ahead of their use; with
    // 128-query steps (head_dim 64) a thread holds 32 and that spills, so there they are read where
    // they are used. FA4's order, 2-4% faster at head_dim 128 than reading LSE after both issues
    // and waiting for Q and dO together (either change alone is not): LSE is read before S^T is
    // issued, and dO is waited for between the S^T and dP^T issues, so S^T starts as soon as Q has
    // landed (dO lands after it: the producer loads Q first). D is read while dP^T runs.
    constexpr bool kEarlyStats = kBlockM == 64;
    const auto lse_log2 =
        query_stats<kEarlyStats, 1, decltype(s_rc)>(score_coords_rc, shared.lse_log2[q_stage] + stats_skip);
    warpgroup_gemm<true, -1>(mma_sdp, tSrK, tSrQ(_, _, _, q_stage), acc_s);
    if (!partial_step) do_pipeline.consumer_wait(do_state);
    warpgroup_gemm<true, -1>(mma_sdp, tSrV, tSrdO(_, _, _, do_stage), acc_dp);

    // The causal mask applies when the queries are in the key tile's own segment; it also hides a
    // response key tile's first step's rows of the previous response (they precede its keys).
    const bool causal = step.causal;
    const bool needs_mask =
        (causal && step.begin < key_begin + work.key_rows - 1) || query_rows < kBlockM || work.key_rows < kBlockN;
    const auto visible = [&](int n, int m) {
      return n < work.key_rows && m < query_rows && (!causal || key_begin + n <= step.begin + m);
    };
    // P while the dP GEMM runs, then dS; the unmasked math on every step and a separate masking
    // pass on boundary steps (masking inside the math put ~15 predicated instructions per score
    // on every step).
    warpgroup_wait<1>();
    warpgroup_fence_operand(acc_s);
    if (q_release_pending) q_pipeline.consumer_release(q_release_state);  // that dK was committed before S^T
    softmax_probabilities<1>(s_rc, lse_log2, scale_log2);
    const auto delta =
        query_stats<kEarlyStats, 1, decltype(s_rc)>(score_coords_rc, shared.delta[do_stage] + stats_skip);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_dp);
    softmax_score_gradients<1>(s_rc, dp_rc, delta);
    if (needs_mask) {
      if constexpr (Config::kLeanIndexRegisters) {
        // The coordinates anew, from an index the compiler cannot hoist out of the loop.
        int masking_thread = thread;
        hide_from_hoisting(masking_thread);
        zero_invisible(s_rc, dp_rc, score_coordinates<Config>(mma_sdp, masking_thread), visible);
      } else {
        zero_invisible(s_rc, dp_rc, score_coords_rc, visible);
      }
    }

    Tensor probabilities = convert_fragment<Element>(acc_s);
    Tensor score_gradients = convert_fragment<Element>(acc_dp);
    Tensor tKVrP = make_tensor(probabilities.data(), accumulator_as_operand_a(acc_s.layout()));
    Tensor tKVrdS = make_tensor(score_gradients.data(), accumulator_as_operand_a(acc_dp.layout()));

    // The next step, read a GEMM batch before this step's Q stage can go back (the producer then
    // writes the slot again): in registers long before the next stage lands.
    const HandedStep handed = shared.steps[q_stage];
    if constexpr (kAccumulateDq) {
      // dS^T to this step's buffer. The other warpgroup read this buffer two steps ago and has
      // since passed the previous step's dS barrier, which it reached after that dQ GEMM's wait.
      ds_store.store(score_gradients, ds_stage);
      warpgroup_gemm<false, -1>(mma_kv, tKVrP, tKVrdOt(_, _, _, do_stage), acc_dv);
      publish_to_consumers<Config>(kDsWrittenBarrier);
      // dQ once dV is done (P^T's registers die: room for the dQ accumulator), then dK, whose
      // GEMM runs while the dQ block is written out.
      Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      warpgroup_gemm<true, 1>(mma_dq, tDqrdS(_, _, _, ds_stage), tDqrKt, acc_dq);
      do_pipeline.consumer_release(do_state);
      warpgroup_gemm<false, 1>(mma_kv, tKVrdS, tKVrQt(_, _, _, q_stage), acc_dk);

      // dQ block to the dQ warp while dK runs, once the warp's reduction of the previous one has
      // read the staging buffer.
      cutlass::arch::NamedBarrier::sync(kDqHandoffThreads, kDqEmptyBarrier + warpgroup);
      stage_dq_block(shared.dq_staged[warpgroup], acc_dq, warpgroup_thread);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::arrive(kDqHandoffThreads, kDqFullBarrier + warpgroup);
      ds_stage ^= 1;
      if constexpr (kDrainDkEachStep) {
        warpgroup_wait<0>();
        q_pipeline.consumer_release(q_state);
      } else {
        q_release_state = q_state;
        q_release_pending = true;
      }
    } else {
      warpgroup_gemm<false, -1>(mma_kv, tKVrP, tKVrdOt(_, _, _, do_stage), acc_dv);
      warpgroup_gemm<false, 0>(mma_kv, tKVrdS, tKVrQt(_, _, _, q_stage), acc_dk);
      q_pipeline.consumer_release(q_state);
      do_pipeline.consumer_release(do_state);
    }
    ++q_state;
    ++do_state;
    if (handed.last) break;
    step = handed.next;
  }
  warpgroup_wait<0>();
  if (q_release_pending) q_pipeline.consumer_release(q_release_state);

  // With lean index registers, from a thread index of its own: ptxas otherwise reused the masking
  // pass's coordinates here, kept in local memory through the step loop (head_dim 64,
  // deterministic mode).
  int epilogue_thread = thread;
  if constexpr (Config::kLeanIndexRegisters) hide_from_hoisting(epilogue_thread);
  store_key_gradients<Config>(mma_kv, epilogue_thread, acc_dk, acc_dv, p, work);
}

template <typename Config, bool kAccumulateDq>
__global__ void __launch_bounds__(Config::kThreads, 1)
    backward_kv_kernel(const __grid_constant__ BackwardTmaParams params) {
  extern __shared__ char shared_bytes[];
  run_backward_frame<Config>(
      params, shared_bytes,
      [&](auto& shared, auto& q_pipeline, auto& do_pipeline) {
        consume_backward<Config, kAccumulateDq>(params, shared, q_pipeline, do_pipeline);
      },
      [&](auto& shared) {
        if constexpr (kAccumulateDq) reduce_staged_dq<Config>(params, shared);
      });
}

}  // namespace dualkv::detail::sm90
