// Compile-time configuration of the sm90a backward kernel whose consumer warpgroups split the head
// dimension (split_d_kernel.cuh; tile_shape.h, BackwardSplit::kHeadDim): the tile shape, the
// warpgroup MMAs, the shared-memory layouts the TMA writes and the wgmma reads, and the storage.
//
// At head_dim 256, dK and dV of one 64-key wgmma M hold 2 x 64 x 256 fp32 values: 256 registers per
// thread of a warpgroup, more than it has. So the key tile is 64 keys, and warpgroup w owns columns
// [128 w, 128 w + 128) of dK, dV and dQ (64 registers each) and queries [32 w, 32 w + 32) of the
// step's S^T and dP^T. The GEMMs, warpgroups side by side along N:
//   S^T  = K Q^T    (64 keys x 32 queries each, k = d):    A = K  K-major, B = Q  K-major
//   dP^T = V dO^T   (likewise):                            A = V  K-major, B = dO K-major
//   dV  += P^T dO   (64 keys x 128 columns each, k = queries): A = P^T K-major (shared), B = dO MN-major
//   dK  += dS^T Q   (likewise):                            A = dS^T K-major (shared), B = Q MN-major
//   dQ   = dS K     (64 queries x 128 columns each, k = keys): A = dS MN-major (shared), B = K MN-major
// P^T and dS^T go through shared memory because each warpgroup's dV and dK contract over all 64
// queries. The (keys, queries) K-major SW128 tile of dS^T is byte for byte the (queries, keys)
// MN-major SW128 tile the dQ GEMM reads as dS (64 queries: one atom wide), so nothing is transposed.
// K, V, Q and dO are stored as in config_common.cuh.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm90/backward/config_common.cuh"
#include "cuda/sm90/backward/dq_accumulator.h"
#include "cuda/sm90/backward/step_hand_over.h"

namespace dualkv::detail::sm90 {

template <typename Element_, int kHeadDim_>
struct SplitDimBackwardConfig : BackwardConfigCommon<Element_, kHeadDim_, 2> {
  using Common = BackwardConfigCommon<Element_, kHeadDim_, 2>;
  using Common::kBlockM;
  using Common::kBlockN;
  using Common::kConsumerWarpgroups;
  using Common::kHeadDim;
  using Common::kPanelColumns;
  using Common::kShape;
  using Common::kStages;
  using Common::kStatsFloats;
  using typename Common::Element;
  using typename Common::Pipeline;
  using typename Common::SmemLayoutKey;
  using typename Common::SmemLayoutQuery;
  static_assert(kShape.split == BackwardSplit::kHeadDim);
  static constexpr int kColumnsPerWarpgroup = kHeadDim / kConsumerWarpgroups;
  static constexpr int kQueriesPerWarpgroup = kBlockM / kConsumerWarpgroups;
  static_assert(kBlockN == 64 && kBlockM == 64, "one wgmma M of keys and one SW128 atom of queries");
  static_assert(kHeadDim % (kPanelColumns * kConsumerWarpgroups) == 0);

  // The producer hands each next step and its dQ slot over one stage early (HandedStepAndDqSlot):
  // the consumers add dQ themselves, and their loop then reads no global memory (the walk's run
  // table, the slot's segment offsets).
  static constexpr bool kHandsDqSlots = true;

  // The dQ accumulator's 64 x 64 blocks (dq_accumulator.h) lie side by side along the columns:
  // block b holds columns [64 b, 64 b + 64), and warpgroup w adds blocks 2 w and 2 w + 1.
  static constexpr int kDqWarpgroupsAlongM = 1;
  static constexpr int dq_block_first_row(int /*block*/) { return 0; }
  static constexpr int dq_block_first_column(int block) { return 64 * block; }

  using WarpgroupsAlongN = cute::Layout<cute::Shape<cute::_1, cute::Int<kConsumerWarpgroups>, cute::_1>>;
  using TiledMmaSdP = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kQueriesPerWarpgroup>, cute::Int<kHeadDim>>>(),
      WarpgroupsAlongN{}));
  using TiledMmaKV = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kColumnsPerWarpgroup>, cute::Int<kBlockM>>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      WarpgroupsAlongN{}));
  using TiledMmaDq = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kColumnsPerWarpgroup>, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::MN, cute::GMMA::Major::MN>(),
      WarpgroupsAlongN{}));

  // Warpgroup w's S^T and dP^T accumulators hold every key and queries [32 w, 32 w + 32).
  static constexpr int score_first_key(int /*warpgroup*/) { return 0; }
  static constexpr int score_first_query(int warpgroup) { return kQueriesPerWarpgroup * warpgroup; }
  static constexpr int kScoreQueriesPerWarpgroup = kQueriesPerWarpgroup;

  // (keys, queries, stage): P^T and dS^T as the A operand of dV and dK, queries contiguous.
  using SmemLayoutScoresT =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockM>, cute::Int<kStages>>{}));
  // (queries, keys, stage): the same bytes as dS^T, the A operand of dQ; P^T and dS^T are stored
  // through it by stmatrix (score_store.cuh).
  using SmemLayoutScores =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::Int<kStages>>{}));

  struct SharedStorage {
    alignas(1024) Element k[cute::cosize_v<SmemLayoutKey>];
    alignas(1024) Element v[cute::cosize_v<SmemLayoutKey>];
    alignas(1024) Element q[cute::cosize_v<SmemLayoutQuery>];
    alignas(1024) Element dout[cute::cosize_v<SmemLayoutQuery>];
    alignas(1024) Element p[cute::cosize_v<SmemLayoutScoresT>];
    alignas(1024) Element ds[cute::cosize_v<SmemLayoutScoresT>];
    alignas(16) float lse_log2[kStages][kStatsFloats];  // from the 16-byte aligned row start at or before the tile
    alignas(16) float delta[kStages][kStatsFloats];
    HandedStepAndDqSlot steps[kStages];            // the step after the stage's, from the producer
    QueryWalk producer_walk;                       // the producer's, read where used (24 registers)
    HandedStepAndDqSlot producer_pending;          // the producer's next hand-over, found before its stage is free
    SegmentCursor producer_segments;               // the producer's, for the slots
    typename Pipeline::SharedStorage q_pipeline;   // Q tile + its LSE
    typename Pipeline::SharedStorage do_pipeline;  // dO tile + its D
    uint64_t kv_full;                              // TMA transaction barrier: K and V have landed
  };
  // The dynamic shared-memory base is rounded up to 1024 bytes (the SW128 pattern's period).
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;
  static_assert(sizeof(SharedStorage) <= backward_tile_bytes(kShape) + 1024, "tile_shape.h and the storage disagree");
};

}  // namespace dualkv::detail::sm90
