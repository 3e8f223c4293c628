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
// 16-bit tiles of d-element rows (K, V, Q, dO) are d / 64 panels of 128-byte swizzled rows, as in
// config.cuh.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "cuda/sm90/backward/tile_shape.h"
#include "host/backward_plan.h"

namespace dualkv::detail::sm90 {

template <typename Element_, int kHeadDim_>
struct SplitDimBackwardConfig {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr BackwardTileShape kShape = *find_backward_tile_shape(kHeadDim);
  static_assert(kShape.split == BackwardSplit::kHeadDim);
  static constexpr int kBlockN = kShape.block_n;
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kStages = kShape.stages;
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = 128 + kConsumerThreads;  // warpgroup 0 produces
  static constexpr int kPanelColumns = 64;                 // 16-bit elements per 128-byte TMA box row
  static constexpr int kPanels = kHeadDim / kPanelColumns;
  static constexpr int kColumnsPerWarpgroup = kHeadDim / kConsumerWarpgroups;
  static constexpr int kQueriesPerWarpgroup = kBlockM / kConsumerWarpgroups;
  static_assert(kBlockN == 64 && kBlockM == 64, "one wgmma M of keys and one SW128 atom of queries");
  static_assert(kHeadDim % (kPanelColumns * kConsumerWarpgroups) == 0);

  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;

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

  // (keys, d): K and V as the A operand of S^T and dP^T.
  using SmemLayoutKey = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                                     cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>>{}));
  // (d, keys): the same bytes as K, the B operand of dQ.
  using SmemLayoutKeyT = decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                                      cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>>{},
                                                      cute::Step<cute::_2, cute::_1>{}));
  // (queries, d, stage): Q and dO as the B operand of S^T and dP^T.
  using SmemLayoutQuery =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));
  // (d, queries, stage): the same bytes, the B operand of dK and dV.
  using SmemLayoutQueryT =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockM>, cute::Int<kStages>>{},
                                   cute::Step<cute::_2, cute::_1, cute::_3>{}));
  // (keys, queries, stage): P^T and dS^T as the A operand of dV and dK, queries contiguous.
  using SmemLayoutScoresT =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockN>, cute::Int<kBlockM>, cute::Int<kStages>>{}));
  // (queries, keys, stage): the same bytes as dS^T, the A operand of dQ.
  using SmemLayoutScores =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::Int<kStages>>{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  // LSE and D of a step: block_m floats at any token, bulk-copied from the 16-byte aligned start
  // at or before it, so up to 3 floats more.
  static constexpr int kStatsFloats = kBlockM + 4;
  static_assert(kStatsFloats <= kStatsReadSlack, "the workspace's stats slack covers one copy past the last row");

  struct SharedStorage {
    alignas(1024) Element k[cute::cosize_v<SmemLayoutKey>];
    alignas(1024) Element v[cute::cosize_v<SmemLayoutKey>];
    alignas(1024) Element q[cute::cosize_v<SmemLayoutQuery>];
    alignas(1024) Element dout[cute::cosize_v<SmemLayoutQuery>];
    alignas(1024) Element p[cute::cosize_v<SmemLayoutScoresT>];
    alignas(1024) Element ds[cute::cosize_v<SmemLayoutScoresT>];
    alignas(16) float lse_log2[kStages][kStatsFloats];  // from the 16-byte aligned row start at or before the tile
    alignas(16) float delta[kStages][kStatsFloats];
    typename Pipeline::SharedStorage q_pipeline;   // Q tile + its LSE
    typename Pipeline::SharedStorage do_pipeline;  // dO tile + its D
    uint64_t kv_full;                              // TMA transaction barrier: K and V have landed
  };
  // The dynamic shared-memory base is rounded up to 1024 bytes (the SW128 pattern's period).
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;
  static_assert(sizeof(SharedStorage) <= backward_tile_bytes(kShape) + 1024, "tile_shape.h and the storage disagree");

  static constexpr uint32_t kQueryStageBytes = kBlockM * kHeadDim * sizeof(Element) + kStatsFloats * sizeof(float);
  static constexpr uint32_t kKeyValueBytes = 2 * kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace dualkv::detail::sm90
