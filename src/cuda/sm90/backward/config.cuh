// Compile-time configuration of the sm90a backward kernel for one (element type, head_dim): the
// tile shape from tile_shape.h, the warpgroup MMAs, the shared-memory layouts the TMA writes and
// the wgmma reads, and the shared storage.
//
// K, V, Q and dO are stored as in config_common.cuh; each GEMM reads them K-major or MN-major, so
// nothing is transposed in memory:
//   S^T  = K Q^T    (keys x queries, k = d):       A = K  K-major, B = Q  K-major
//   dP^T = V dO^T   (keys x queries, k = d):       A = V  K-major, B = dO K-major
//   dV  += P^T dO   (keys x d, k = queries):       A = P^T registers, B = dO MN-major
//   dK  += dS^T Q   (keys x d, k = queries):       A = dS^T registers, B = Q MN-major
//   dQ   = dS K     (queries x d, k = keys):       A = dS MN-major (shared), B = K MN-major
// Consumer warpgroup w owns keys [64 w, 64 w + 64) of the first four GEMMs. dS crosses shared
// memory because dQ contracts over all block_n keys: each warpgroup computes a 64 x 64 block of
// dQ (d = 128: its half of the columns; d = 64 with 128-query steps: its half of the rows).
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/query_walk.h"
#include "cuda/sm90/backward/config_common.cuh"
#include "cuda/sm90/backward/step_hand_over.h"

namespace dualkv::detail::sm90 {

// Each consumer warpgroup owns 64 keys of the tile.
template <typename Element, int kHeadDim>
using KeySplitCommon = BackwardConfigCommon<Element, kHeadDim, find_backward_tile_shape(kHeadDim)->block_n / 64>;

template <typename Element_, int kHeadDim_>
struct BackwardConfig : KeySplitCommon<Element_, kHeadDim_> {
  using Common = KeySplitCommon<Element_, kHeadDim_>;
  using Common::kBlockM;
  using Common::kBlockN;
  using Common::kConsumerWarpgroups;
  using Common::kHeadDim;
  using Common::kShape;
  using Common::kStages;
  using Common::kStatsFloats;
  using typename Common::Element;
  using typename Common::Pipeline;
  using typename Common::SmemLayoutKey;
  using typename Common::SmemLayoutQuery;
  static_assert(kShape.split == BackwardSplit::kKeys && kBlockN == 64 * kConsumerWarpgroups);
  static_assert(kBlockM % 64 == 0);

  // The producer hands each next step to the consumers one stage early (key_tile_common.cuh): their
  // loop then holds no global load (the walk's run-table reads). The dQ warp walks the steps for
  // their dQ slots itself.
  static constexpr bool kHandsDqSlots = false;

  // dQ blocks of 64 x 64 per warpgroup: along rows when a step has 2 x 64 queries, else columns.
  static constexpr int kDqWarpgroupsAlongM = kBlockM / 64;
  static constexpr int kDqWarpgroupsAlongN = kConsumerWarpgroups / kDqWarpgroupsAlongM;
  static constexpr int kDqBlockColumns = kHeadDim / kDqWarpgroupsAlongN;
  static_assert(kDqWarpgroupsAlongM * kDqWarpgroupsAlongN == kConsumerWarpgroups && kDqBlockColumns == 64);
  // Where consumer warpgroup w's 64 x 64 dQ block starts in the step's (block_m x d) dQ tile.
  static constexpr int dq_block_first_row(int warpgroup) { return kDqWarpgroupsAlongM == 1 ? 0 : 64 * warpgroup; }
  static constexpr int dq_block_first_column(int warpgroup) { return kDqWarpgroupsAlongM == 1 ? 64 * warpgroup : 0; }

  using WarpgroupsAlongM = cute::Layout<cute::Shape<cute::Int<kConsumerWarpgroups>, cute::_1, cute::_1>>;
  using TiledMmaSdP = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kBlockM>, cute::Int<kHeadDim>>>(),
      WarpgroupsAlongM{}));
  using TiledMmaKV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kHeadDim>, cute::Int<kBlockM>>, cute::GMMA::Major::K,
                                 cute::GMMA::Major::MN>(),
      WarpgroupsAlongM{}));
  using TiledMmaDq = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kDqBlockColumns>, cute::Int<kBlockN>>,
                                 cute::GMMA::Major::MN, cute::GMMA::Major::MN>(),
      cute::Layout<cute::Shape<cute::Int<kDqWarpgroupsAlongM>, cute::Int<kDqWarpgroupsAlongN>, cute::_1>>{}));

  // Warpgroup w's S^T and dP^T accumulators hold keys [64 w, 64 w + 64) and every query.
  static constexpr int score_first_key(int warpgroup) { return 64 * warpgroup; }
  static constexpr int score_first_query(int /*warpgroup*/) { return 0; }
  static constexpr int kScoreQueriesPerWarpgroup = kBlockM;

  // (queries, keys, stage): dS as the A operand of dQ, queries contiguous; the dS^T accumulator is
  // stored into it by stmatrix (score_store.cuh).
  using SmemLayoutDs =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::Int<kStages>>{}));

  // head_dim 64's 128-query steps hold 64 + 64 score accumulators per consumer thread beside dK and
  // dV: no register is left for per-thread index values held across the step loop, which ptxas
  // spilled to local memory. There the operand descriptors come from the warpgroup's first thread
  // (uniform registers) and the masking pass of boundary steps recomputes its coordinates.
  // head_dim 128 keeps per-thread descriptors: uniform ones measured 1-4% slower there
  // (docs/performance.md, "Tried and dropped").
  static constexpr bool kLeanIndexRegisters = kBlockM == 128;

  struct SharedStorage {
    alignas(1024) Element k[cute::cosize_v<SmemLayoutKey>];
    alignas(1024) Element v[cute::cosize_v<SmemLayoutKey>];
    alignas(1024) Element q[cute::cosize_v<SmemLayoutQuery>];
    alignas(1024) Element dout[cute::cosize_v<SmemLayoutQuery>];
    alignas(1024) Element ds[cute::cosize_v<SmemLayoutDs>];
    alignas(128) float dq_staged[kConsumerWarpgroups][kStagedDqFloats];  // atomic mode: dQ blocks in register order
    alignas(16) float lse_log2[kStages][kStatsFloats];  // from the 16-byte aligned row start at or before the tile
    alignas(16) float delta[kStages][kStatsFloats];
    HandedStep steps[kStages];                     // the step after the stage's, from the producer
    QueryWalk producer_walk;                       // the producer's, read where used (24 registers)
    HandedStep producer_pending;                   // the producer's next hand-over, found before its stage is free
    typename Pipeline::SharedStorage q_pipeline;   // Q tile + its LSE
    typename Pipeline::SharedStorage do_pipeline;  // dO tile + its D
    uint64_t kv_full;                              // TMA transaction barrier: K and V have landed
  };
  // The dynamic shared-memory base is rounded up to 1024 bytes (the SW128 pattern's period).
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;
  static_assert(sizeof(SharedStorage) <= backward_tile_bytes(kShape) + 1024, "tile_shape.h and the storage disagree");
};

}  // namespace dualkv::detail::sm90
