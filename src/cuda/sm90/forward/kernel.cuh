// sm90a fused forward kernel: TMA loads, warp specialisation, wgmma with register accumulators.
//
// Work: a persistent grid; CTA b takes one item per pass over the grid (b, 2 gridDim.x - 1 - b,
// 2 gridDim.x + b, ...: work_item_of_round) of the KV heads x tiles x group-heads list (WorkItem):
// KV head outermost, then the host plan's tiles heaviest first, then the G = H / Hk query heads of
// the KV head. So the CTAs running at any moment read one KV head's K and V (32 MiB for a 64K
// prompt, inside L2) rather than all Hk of them, and the G heads of a tile read the same K/V rows
// side by side. (Items from an atomic counter instead balanced no better and ran 1-3% slower:
// docs/performance.md.)
//
// Warp roles (kThreads = 128 + 128 x consumer warpgroups):
//   warpgroup 0, producer: one elected thread issues every TMA load (Q tile, then per key block
//     K(n + 1) before V(n), the order the consumers need them); setmaxnreg lowers its registers.
//   warpgroups 1.., consumers: warpgroup w owns query rows [64 (w - 1), 64 w) of the tile. Per key
//     block: S = Q K^T (wgmma, both operands in shared memory), mask, online softmax in registers,
//     O += P V (wgmma, P from registers). Block n retires P(n - 2) V(n - 2), issues S(n) and
//     P(n - 1) V(n - 1) back to back, then computes the softmax of block n while P(n - 1) V(n - 1)
//     runs; P(n) goes to the other of two register buffers. The reference maximum is lazy
//     (online_softmax.cuh): O is rescaled, per warp and with no wgmma in flight, only when a row's
//     maximum jumps. Control flow around every wgmma depends on the walk alone, the same in the
//     four warps of a warpgroup.
//
// Pipeline: Q single-buffered (q_full / q_empty barriers); K and V each through kStages buffers
// of CUTLASS's PipelineTmaAsync (full: TMA transaction bytes; empty: every consumer thread).
// The key blocks are the tile's key-range list walked by KeyBlockWalk: unmasked blocks (the whole
// response-to-prompt rectangle) skip the mask; a block reaching past its range has the rows
// beyond the range zeroed in its V buffer before P V (TMA loads them from the next segment, and
// P = 0 times a NaN there would still be NaN).
//
// Shared memory (config.cuh): Q (block_m x d) | K kStages x (block_n x d) | V kStages x
// (block_n x d) | pipeline and Q barriers; each tile in 64-column SW128 panels.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "cuda/common/key_block_walk.h"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sm90/common/fragments.cuh"
#include "cuda/sm90/common/hide_from_hoisting.cuh"
#include "cuda/sm90/common/tma_tile.cuh"
#include "cuda/sm90/common/warp_specialized.cuh"
#include "cuda/sm90/forward/config.cuh"
#include "cuda/sm90/forward/launch.h"

namespace dualkv::detail::sm90 {

// Named barrier (beyond CUTLASS's reserved ones) for the consumer warpgroups' V-row zeroing.
constexpr uint32_t kZeroedVBarrier = 0;

// Work item i of the KV-head-major order described above.
struct WorkItem {
  QueryTile tile;
  int head;
  int kv_head;

  __device__ __forceinline__ WorkItem(const ForwardKernelParams& p, int item) {
    const int per_kv_head = p.num_tiles * p.heads_per_kv_head;
    kv_head = item / per_kv_head;
    const int rest = item - kv_head * per_kv_head;
    tile = p.tiles[rest / p.heads_per_kv_head];
    head = kv_head * p.heads_per_kv_head + rest % p.heads_per_kv_head;
  }
};

// The work item of this CTA's `round`-th pass over the grid. Rounds alternate direction: the
// items are sorted heaviest first within a KV head, so a fixed stride would give the low CTAs the
// heavier item of every round and make them finish last.
__device__ __forceinline__ int work_item_of_round(int round) {
  const int position = (round & 1) ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  return round * static_cast<int>(gridDim.x) + position;
}

template <typename Config>
__device__ void produce(const ForwardKernelParams& p, typename Config::SharedStorage& shared,
                        typename Config::Pipeline& k_pipeline, typename Config::Pipeline& v_pipeline) {
  using Element = typename Config::Element;
  constexpr int kBlockN = Config::kBlockN;
  auto k_state = cutlass::make_producer_start_state<typename Config::Pipeline>();
  auto v_state = cutlass::make_producer_start_state<typename Config::Pipeline>();
  auto& q_full = *reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(&shared.q_full);
  auto& q_empty = *reinterpret_cast<cutlass::arch::ClusterBarrier*>(&shared.q_empty);
  const int items = p.num_tiles * p.heads;

  auto load_key_block = [&](typename Config::Pipeline& pipeline, auto& state, const CUtensorMap* map, Element* buffers,
                            int kv_head, int key_begin) {
    pipeline.producer_acquire(state);
    load_tile<Config>(map, pipeline.producer_get_barrier(state), buffers + state.index() * kBlockN * Config::kHeadDim,
                      kBlockN, kv_head, key_begin, kEvictLast);
    ++state;
  };

  for (int iteration = 0, item = work_item_of_round(0); item < items; item = work_item_of_round(++iteration)) {
    const WorkItem work(p, item);
    const QueryTile& tile = work.tile;
    const int head = work.head;
    const int kv_head = work.kv_head;
    if (iteration > 0) q_empty.wait((iteration - 1) & 1);
    q_full.arrive_and_expect_tx(Config::kQBytes);
    load_tile<Config>(&p.q_map, &shared.q_full, shared.q, Config::kBlockM, head, tile.q_begin, kEvictFirst);

    KeyBlockWalk<kBlockN> walk(tile, p.ranges);
    int previous_key_begin = walk.key_begin();
    load_key_block(k_pipeline, k_state, &p.k_map, shared.k, kv_head, previous_key_begin);
    for (walk.advance(); !walk.done(); walk.advance()) {
      load_key_block(k_pipeline, k_state, &p.k_map, shared.k, kv_head, walk.key_begin());
      load_key_block(v_pipeline, v_state, &p.v_map, shared.v, kv_head, previous_key_begin);
      previous_key_begin = walk.key_begin();
    }
    load_key_block(v_pipeline, v_state, &p.v_map, shared.v, kv_head, previous_key_begin);
  }
}

// Scores of keys outside the block's range and, in the causal range, after the query: -inf.
template <typename Scores, typename Coords, typename Walk>
__device__ __forceinline__ void mask_scores(Scores& scores, const Coords& coords, const Walk& walk, int q_begin) {
  const BlockMask mask = walk.mask();
  if (mask == BlockMask::kNone) return;
  const bool causal = mask == BlockMask::kCausal;
  CUTE_UNROLL
  for (int i = 0; i < cute::size(scores); ++i) {
    const int query = q_begin + cute::get<0>(coords(i));
    const int key = walk.key_begin() + cute::get<1>(coords(i));
    if (key >= walk.range_end() || (causal && key > query)) scores(i) = -INFINITY;
  }
}

// Zeroes V rows [valid_rows, block_n) of one stage (keys past the block's range), then makes the
// writes visible to the wgmma (async proxy) of every consumer warpgroup.
template <typename Config, typename VtStage>
__device__ __forceinline__ void zero_foreign_v_rows(VtStage& vt, int valid_rows, int consumer_thread) {
  using Element = typename Config::Element;
  const int count = (Config::kBlockN - valid_rows) * Config::kHeadDim;
  hide_from_hoisting(consumer_thread);
  for (int i = consumer_thread; i < count; i += Config::kConsumerThreads) {
    vt(i % Config::kHeadDim, valid_rows + i / Config::kHeadDim) = Element(0);
  }
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(Config::kConsumerThreads, kZeroedVBarrier);
}

template <typename Config>
__device__ void consume(const ForwardKernelParams& p, typename Config::SharedStorage& shared,
                        typename Config::Pipeline& k_pipeline, typename Config::Pipeline& v_pipeline) {
  using namespace cute;
  using Element = typename Config::Element;
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  constexpr int kHeadDim = Config::kHeadDim;
  const int thread = threadIdx.x - 128;

  Tensor sQ = make_tensor(make_smem_ptr(shared.q), typename Config::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(shared.k), typename Config::SmemLayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(shared.v), typename Config::SmemLayoutVt{});
  typename Config::TiledMmaS mma_s;
  typename Config::TiledMmaO mma_o;
  auto slice_s = mma_s.get_thread_slice(thread);
  auto slice_o = mma_o.get_thread_slice(thread);
  auto operands_s = consumer_operand_slice(mma_s);
  Tensor tSrQ = operands_s.partition_fragment_A(sQ);
  Tensor tSrK = operands_s.partition_fragment_B(sK);
  Tensor tOrV = consumer_operand_slice(mma_o).partition_fragment_B(sVt);
  Tensor tScS = slice_s.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor tOcO = slice_o.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));

  auto& q_full = *reinterpret_cast<cutlass::arch::ClusterTransactionBarrier*>(&shared.q_full);
  auto& q_empty = *reinterpret_cast<cutlass::arch::ClusterBarrier*>(&shared.q_empty);
  typename Config::Pipeline::PipelineState k_state, v_state;
  const int items = p.num_tiles * p.heads;

  for (int iteration = 0, item = work_item_of_round(0); item < items; item = work_item_of_round(++iteration)) {
    const WorkItem work(p, item);
    const QueryTile& tile = work.tile;
    const int head = work.head;

    Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<kBlockM>, Int<kHeadDim>>{});
    Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<kBlockM>, Int<kBlockN>>{});
    Tensor scores = make_tensor(acc_s.data(), accumulator_rows_by_columns(acc_s.layout()));
    Tensor out = make_tensor(acc_o.data(), accumulator_rows_by_columns(acc_o.layout()));
    constexpr int kRows = decltype(size<0>(scores))::value;
    OnlineSoftmax<kRows> softmax;
    clear(acc_o);

    // Rows of the previous block's V buffer to keep (block_n unless it reached past its range).
    auto valid_v_rows = [](const KeyBlockWalk<kBlockN>& walk) {
      return walk.reaches_past_range() ? walk.range_end() - walk.key_begin() : kBlockN;
    };
    // Waits for the next V buffer and zeroes its rows past the block's range, if any.
    auto wait_for_v = [&](int valid_rows) {
      v_pipeline.consumer_wait(v_state);
      if (valid_rows < kBlockN) {
        Tensor vt = sVt(_, _, v_state.index());
        zero_foreign_v_rows<Config>(vt, valid_rows, thread);
      }
    };

    KeyBlockWalk<kBlockN> walk(tile, p.ranges);
    q_full.wait(iteration & 1);
    k_pipeline.consumer_wait(k_state);
    warpgroup_gemm<true, 0>(mma_s, tSrQ, tSrK(_, _, _, k_state.index()), acc_s);
    k_pipeline.consumer_release(k_state);
    ++k_state;
    mask_scores(acc_s, tScS, walk, tile.q_begin);
    int valid_rows = valid_v_rows(walk);
    walk.advance();
    if (walk.done()) q_empty.arrive();
    softmax.update_lazy(scores, p.softmax_scale_log2);

    // P of two consecutive blocks in two register buffers: P(n) is converted while P(n - 1) V(n - 1)
    // still reads the other one (a wgmma's register operand must not change until it retires).
    Tensor p_ready = convert_fragment<Element>(acc_s);  // P of the block before the walk's current one
    decltype(p_ready) p_spare;
    // One key block n of the pipelined loop, p_previous holding P(n - 1): P(n - 2) V(n - 2) is
    // retired and O rescaled by the factor of block n - 1 (per warp, rarely: the lazy maximum);
    // then S(n) and P(n - 1) V(n - 1) are issued back to back, the softmax of block n runs under
    // P(n - 1) V(n - 1), and P(n) goes to p_current. Returns whether the walk goes on. The control
    // flow around every wgmma instruction depends only on the walk, the same for the four warps of
    // the warpgroup (wgmma, its waits included, is .sync.aligned over them).
    // Inlined by force: nvcc outlines a lambda called twice, and ptxas then brackets every wgmma of
    // the call with its own arrive and wait (C7519).
    bool pv_in_flight = false;
    auto pipelined_block = [&](auto& p_previous, auto& p_current) __attribute__((always_inline)) {
      warpgroup_wait<0>();  // P(n - 2) V(n - 2) has retired
      if (pv_in_flight) {
        v_pipeline.consumer_release(v_state);
        ++v_state;
      }
      softmax.rescale_output(out);
      k_pipeline.consumer_wait(k_state);
      warpgroup_gemm<true, -1>(mma_s, tSrQ, tSrK(_, _, _, k_state.index()), acc_s);
      Tensor tOrP = make_tensor(p_previous.data(), accumulator_as_operand_a(acc_s.layout()));
      wait_for_v(valid_rows);
      warpgroup_gemm<false, -1>(mma_o, tOrP, tOrV(_, _, _, v_state.index()), acc_o);
      pv_in_flight = true;
      warpgroup_wait<1>();  // S(n) is done; P(n - 1) V(n - 1) may still run
      k_pipeline.consumer_release(k_state);
      ++k_state;
      mask_scores(acc_s, tScS, walk, tile.q_begin);
      valid_rows = valid_v_rows(walk);
      walk.advance();
      if (walk.done()) q_empty.arrive();
      softmax.update_lazy(scores, p.softmax_scale_log2);
      p_current = convert_fragment<Element>(acc_s);
      return !walk.done();
    };
    bool latest_in_spare = false;  // whether p_spare rather than p_ready holds the last block's P
    if (!walk.done()) {
      for (;;) {
        if (!pipelined_block(p_ready, p_spare)) {
          latest_in_spare = true;
          break;
        }
        if (!pipelined_block(p_spare, p_ready)) break;
      }
    }
    warpgroup_wait<0>();
    if (pv_in_flight) {
      v_pipeline.consumer_release(v_state);
      ++v_state;
    }
    softmax.rescale_output(out);
    auto last_block_pv = [&](auto& p_last) {
      Tensor tOrP = make_tensor(p_last.data(), accumulator_as_operand_a(acc_s.layout()));
      wait_for_v(valid_rows);
      warpgroup_gemm<false, 0>(mma_o, tOrP, tOrV(_, _, _, v_state.index()), acc_o);
      v_pipeline.consumer_release(v_state);
      ++v_state;
    };
    if (latest_in_spare) {
      last_block_pv(p_spare);
    } else {
      last_block_pv(p_ready);
    }

    // Epilogue: normalise; LSE from the lane holding column 0 of its rows; O as column pairs.
    float lse[kRows];
    softmax.finish(out, p.softmax_scale, lse);
    const int rows = tile.q_end - tile.q_begin;
    Tensor row_coords = make_tensor(tScS.data(), accumulator_rows_by_columns(tScS.layout()));
    store_row_lse(row_coords, lse, p.lse + head * p.lse_head_stride + tile.q_begin, rows);
    Tensor o16 = convert_fragment<Element>(acc_o);
    Element* out_head = static_cast<Element*>(p.out) + tile.q_begin * p.out_token_stride + head * p.out_head_stride;
    CUTE_UNROLL
    for (int i = 0; i < size(o16); i += 2) {
      const int row = get<0>(tOcO(i));
      if (row < rows) {
        const int column = get<1>(tOcO(i));
        cutlass::Array<Element, 2> pair;
        pair[0] = o16(i);
        pair[1] = o16(i + 1);
        *reinterpret_cast<cutlass::Array<Element, 2>*>(out_head + row * p.out_token_stride + column) = pair;
      }
    }
  }
}

template <typename Config>
__global__ void __launch_bounds__(Config::kThreads, 1) forward_kernel(const __grid_constant__ ForwardKernelParams p) {
  extern __shared__ char shared_bytes[];
  auto& shared = aligned_shared_storage<Config>(shared_bytes);
  auto k_pipeline = make_tma_pipeline<Config>(shared.k_pipeline, Config::kKeyBlockBytes);
  auto v_pipeline = make_tma_pipeline<Config>(shared.v_pipeline, Config::kKeyBlockBytes);
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&shared.q_full, 1);
    cutlass::arch::ClusterBarrier::init(&shared.q_empty, Config::kConsumerThreads);
  }
  run_warp_specialized<Config>(
      [&] {
        if (threadIdx.x == 0) produce<Config>(p, shared, k_pipeline, v_pipeline);
      },
      [&] { consume<Config>(p, shared, k_pipeline, v_pipeline); });
}

}  // namespace dualkv::detail::sm90
