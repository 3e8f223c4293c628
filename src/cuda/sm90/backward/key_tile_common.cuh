// What both sm90a backward kernels (kernel.cuh: consumer warpgroups split the key tile;
// split_d_kernel.cuh: they split the head dimension) share: the CTA's key tile, the producer
// thread's TMA loads, the consumers' shared-memory publication, and the score coordinates.
//
// A Config provides Element, kHeadDim, kBlockN, kBlockM, kStatsFloats, kKeyValueBytes,
// kConsumerThreads, kPanels, kPanelColumns, kHandsDqSlots, Pipeline and a SharedStorage
// holding k, v, q, dout (16-bit tiles in 64-column SW128 panels), lse_log2 and delta (kStages x
// kStatsFloats floats), steps, producer_walk, producer_pending (and producer_segments where
// kHandsDqSlots), the two query pipelines and the K/V transaction barrier kv_full.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/query_walk.h"
#include "cuda/sm90/backward/launch.h"
#include "cuda/sm90/backward/step_hand_over.h"
#include "cuda/sm90/backward/walk_pacing.cuh"
#include "cuda/sm90/common/fragments.cuh"
#include "cuda/sm90/common/tma_tile.cuh"
#include "cuda/sm90/common/warp_specialized.cuh"

namespace dualkv::detail::sm90 {

// The key tile and KV head of this CTA.
struct KeyTileWork {
  TileWork tile;
  int kv_head;
  int key_rows;  // keys of the tile inside its segment

  __device__ __forceinline__ KeyTileWork(const BackwardKernelParams& p, int block_n) {
    kv_head = static_cast<int>(blockIdx.x) % p.kv_heads;
    tile = p.key_tiles[blockIdx.x / p.kv_heads];
    key_rows = min(block_n, p.cu_seqlens[tile.segment + 1] - tile.begin);
  }
};

// Makes every consumer thread's shared-memory writes visible to the wgmma (async proxy) of both
// consumer warpgroups.
template <typename Config>
__device__ __forceinline__ void publish_to_consumers(uint32_t barrier) {
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(Config::kConsumerThreads, barrier);
}

// The 16-byte aligned start, at or before the step's first query, of its row of a stats array
// (D or lse_log2): bulk copies need 16-byte aligned sources, rows start aligned
// (stats_row_stride is a multiple of 4), and the consumers skip the step's first `begin % 4`.
__device__ __forceinline__ const float* stats_row(const float* stats, const BackwardKernelParams& p,
                                                  const QueryStep& step) {
  return stats + step.head * p.stats_row_stride + (step.begin & ~3);
}

// (key, query) of each of consumer thread `thread`'s score accumulators, by (row, column).
template <typename Config, typename TiledMma>
__device__ __forceinline__ auto score_coordinates(const TiledMma& mma_sdp, int thread) {
  using namespace cute;
  Tensor coords = mma_sdp.get_thread_slice(thread).partition_C(
      make_identity_tensor(Shape<Int<Config::kBlockN>, Int<Config::kBlockM>>{}));
  return make_tensor(coords.data(), accumulator_rows_by_columns(coords.layout()));
}

template <typename Config>
__device__ void produce_backward(const BackwardTmaParams& params, typename Config::SharedStorage& shared,
                                 typename Config::Pipeline& q_pipeline, typename Config::Pipeline& do_pipeline) {
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kTileElements = kBlockM * Config::kHeadDim;
  constexpr int kStatsBytes = Config::kStatsFloats * sizeof(float);
  const BackwardKernelParams& p = params.base;
  const KeyTileWork work(p, Config::kBlockN);
  auto& kv_full = *reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(&shared.kv_full);
  kv_full.arrive_and_expect_tx(Config::kKeyValueBytes);
  load_tile<Config>(&params.k_map, &shared.kv_full, shared.k, Config::kBlockN, work.kv_head, work.tile.begin,
                    kEvictFirst);
  load_tile<Config>(&params.v_map, &shared.kv_full, shared.v, Config::kBlockN, work.kv_head, work.tile.begin,
                    kEvictFirst);

  // The Q and dO pipelines move in step: one state for both.
  auto state = cutlass::make_producer_start_state<typename Config::Pipeline>();
  shared.producer_walk =
      QueryWalk::of_key_tile(p.cu_seqlens, p.runs, work.tile, work.kv_head, p.heads / p.kv_heads, kBlockM);
  const QueryWalk& walk = shared.producer_walk;
  if constexpr (Config::kHandsDqSlots) shared.producer_segments = SegmentCursor{p.cu_seqlens};
  // One stage of a per-step pipeline: a (block_m x d) tile and its row of per-query statistics,
  // issued once the stage is free (Q, dO, LSE and D rows are read by every key tile that sees them:
  // kept in L2). The producer's arrival on the stage's full barrier (with the bytes to expect)
  // comes after the step is handed over (below): the transfers may complete bytes before the
  // arrival expects them (an mbarrier's transaction count may go below zero), and the phase
  // completes only after both.
  const auto load_stage = [&](typename Config::Pipeline& pipeline, const CUtensorMap* map,
                              typename Config::Element* tiles, const float* stats,
                              float(*stats_stages)[Config::kStatsFloats], const QueryStep& step) {
    while (pipeline.producer_try_acquire(state) != cutlass::BarrierStatus::WaitDone) {
    }
    uint64_t* barrier = pipeline.producer_get_barrier(state);
    load_tile<Config>(map, barrier, tiles + state.index() * kTileElements, kBlockM, step.head, step.begin, kEvictLast);
    cute::SM90_BULK_COPY_G2S::copy(stats_row(stats, p, step), barrier, stats_stages[state.index()], kStatsBytes);
  };
  const auto arrive = [&](typename Config::Pipeline& pipeline) {
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(pipeline.producer_get_barrier(state),
                                                                   Config::kQueryStageBytes);
  };
  // The step after each step goes beside its Q stage (with its dQ slot where kHandsDqSlots) before
  // the producer's arrival on the stage's full barrier (a release that the consumers' wait
  // acquires), with whether the step is the walk's last (a walk is never empty: a key tile's own
  // rows see it). The consumers compute the first step themselves. The producer finds it before
  // waiting for the stage (into producer_pending: the stage's slot may still be read), so the
  // walk's and the slot's global reads never delay an arrival: the consumers give a stage back only
  // when the next step's S^T is done, and a late producer would delay that step's successor. Its
  // walk, cursor and pending step are in shared memory, read where used: its warpgroup has 24
  // registers.
  // Paced walks (walk_pacing.h): the position goes out before the step's loads, and a producer too
  // far ahead of its predecessor waits there.
  const WalkPacer<Config::kWalkLeadRows> pacer(p);
  for (QueryStep step = walk.first;;) {
    const QueryStep loading = step;
    pacer.pace(loading);
    bool last;
    if constexpr (Config::kHandsDqSlots) {
      const DqSlotSource slots{work.tile, p.runs, shared.producer_segments,
                               dq_tail_slots_begin(p.tokens, p.num_segments, kBlockM), kBlockM};
      last = hand_over_next(walk, step, shared.producer_pending, slots);
    } else {
      last = hand_over_next(walk, step, shared.producer_pending);
    }
    load_stage(q_pipeline, &params.q_map, shared.q, p.lse_log2, shared.lse_log2, loading);
    load_stage(do_pipeline, &params.dout_map, shared.dout, p.delta, shared.delta, loading);
    shared.steps[state.index()] = shared.producer_pending;
    arrive(q_pipeline);
    arrive(do_pipeline);
    ++state;
    if (last) break;
  }
  pacer.finish();
}

// Epilogue: dK = scale * sum dS^T Q and dV = sum P^T dO of consumer thread `thread`'s values of
// `mma_kv`'s (block_n x d) accumulators, as column pairs, rows inside the key tile's segment.
template <typename Config, typename TiledMmaKV, typename Accumulator>
__device__ __forceinline__ void store_key_gradients(const TiledMmaKV& mma_kv, int thread, const Accumulator& acc_dk,
                                                    const Accumulator& acc_dv, const BackwardKernelParams& p,
                                                    const KeyTileWork& work) {
  using namespace cute;
  using Element = typename Config::Element;
  Tensor out_coords = mma_kv.get_thread_slice(thread).partition_C(
      make_identity_tensor(Shape<Int<Config::kBlockN>, Int<Config::kHeadDim>>{}));
  const int64_t key_begin = work.tile.begin;
  auto* dk = static_cast<Element*>(p.dk.data) + key_begin * p.dk.token_stride + work.kv_head * p.dk.head_stride;
  auto* dv = static_cast<Element*>(p.dv.data) + key_begin * p.dv.token_stride + work.kv_head * p.dv.head_stride;
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dk); i += 2) {
    const int row = get<0>(out_coords(i));
    if (row < work.key_rows) {
      const int column = get<1>(out_coords(i));
      cutlass::Array<Element, 2> dk_pair, dv_pair;
      dk_pair[0] = static_cast<Element>(acc_dk(i) * p.softmax_scale);
      dk_pair[1] = static_cast<Element>(acc_dk(i + 1) * p.softmax_scale);
      dv_pair[0] = static_cast<Element>(acc_dv(i));
      dv_pair[1] = static_cast<Element>(acc_dv(i + 1));
      *reinterpret_cast<cutlass::Array<Element, 2>*>(dk + row * p.dk.token_stride + column) = dk_pair;
      *reinterpret_cast<cutlass::Array<Element, 2>*>(dv + row * p.dv.token_stride + column) = dv_pair;
    }
  }
}

// The kernel frame of both backward kernels: barriers, pipelines and warp roles. `consume` runs
// on the consumer warpgroups; `reduce` on warp 1 of the producer warpgroup (nothing when the
// kernel has no dQ warp).
template <typename Config, typename Consume, typename Reduce>
__device__ __forceinline__ void run_backward_frame(const BackwardTmaParams& params, char* shared_bytes,
                                                   const Consume& consume, const Reduce& reduce) {
  auto& shared = aligned_shared_storage<Config>(shared_bytes);
  auto q_pipeline = make_tma_pipeline<Config>(shared.q_pipeline, Config::kQueryStageBytes);
  auto do_pipeline = make_tma_pipeline<Config>(shared.do_pipeline, Config::kQueryStageBytes);
  if (threadIdx.x == 0) cutlass::arch::ClusterTransactionBarrier::init(&shared.kv_full, 1);
  run_warp_specialized<Config>(
      [&] {
        if (threadIdx.x == 0) produce_backward<Config>(params, shared, q_pipeline, do_pipeline);
        if (threadIdx.x / 32 == 1) reduce(shared);
      },
      [&] { consume(shared, q_pipeline, do_pipeline); });
}

}  // namespace dualkv::detail::sm90
