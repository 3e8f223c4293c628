// What the two sm90a backward configurations (config.cuh: consumer warpgroups split the key tile;
// split_d_config.cuh: they split the head dimension) share: the sizes of the head_dim's tile
// shape, the warp roles and register split, the shared-memory layouts of K, V, Q and dO, the query
// pipeline and the bytes each TMA transaction brings.
//
// 16-bit tiles of d-element rows (K, V, Q, dO) are stored as d / 64 panels of 64-element (128-byte)
// rows with the 128-byte swizzle: what one TMA box {64, 1, rows} writes, and GMMA's K-major SW128
// atom. A GEMM that needs the same tile with the other dimension contracted reads the same bytes
// through the MN-major SW128 atom (the ...T layouts), so nothing is transposed in memory.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "cuda/sm90/backward/tile_shape.h"
#include "host/backward_plan.h"

namespace dualkv::detail::sm90 {

template <typename Element_, int kHeadDim_, int kConsumerWarpgroups_>
struct BackwardConfigCommon {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr BackwardTileShape kShape = *find_backward_tile_shape(kHeadDim);
  static constexpr int kBlockN = kShape.block_n;
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kStages = kShape.stages;
  static constexpr int kWalkLeadRows = kShape.walk_lead_steps * kBlockM;  // walk_pacing.h; 0: not paced
  static constexpr int kConsumerWarpgroups = kConsumerWarpgroups_;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = 128 + kConsumerThreads;  // warpgroup 0 produces
  static constexpr int kPanelColumns = 64;                 // 16-bit elements per 128-byte TMA box row
  static constexpr int kPanels = kHeadDim / kPanelColumns;
  static_assert(kConsumerWarpgroups == 2, "the register budget below is for two consumer warpgroups");
  static_assert(kHeadDim % kPanelColumns == 0);

  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;

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

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  // LSE and D of a step: block_m floats at any token, bulk-copied from the 16-byte aligned start
  // at or before it, so up to 3 floats more.
  static constexpr int kStatsFloats = kBlockM + 4;
  static_assert(kStatsFloats <= kStatsReadSlack, "the workspace's stats slack covers one copy past the last row");

  static constexpr uint32_t kQueryStageBytes = kBlockM * kHeadDim * sizeof(Element) + kStatsFloats * sizeof(float);
  static constexpr uint32_t kKeyValueBytes = 2 * kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace dualkv::detail::sm90
