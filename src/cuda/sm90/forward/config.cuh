// Compile-time configuration of the sm90a forward kernel for one (element type, head_dim): the
// tile shape from tile_shape.h, the two warpgroup MMAs, the shared-memory layouts the TMA writes
// and the wgmma reads, and the shared storage.
//
// Every tile of 16-bit rows of d elements is stored as d / 64 panels of 64-element (128-byte)
// rows with the 128-byte swizzle: exactly what one TMA box {64, 1, rows} writes, and the layout
// of GMMA's K-major SW128 atom for Q and K. V is stored the same way (rows = keys) and read by
// the P V wgmma as its MN-major B operand (d contiguous): the same bytes through the MN-major
// SW128 atom, tiled keys first, so no transpose is ever made.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "cuda/sm90/forward/tile_shape.h"

namespace dualkv::detail::sm90 {

template <typename Element_, int kHeadDim_>
struct ForwardConfig {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr ForwardTileShape kShape = *find_forward_tile_shape(kHeadDim);
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kBlockN = kShape.block_n;
  static constexpr int kStages = kShape.stages;
  static constexpr int kConsumerWarpgroups = kBlockM / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = 128 + kConsumerThreads;  // warpgroup 0 produces
  static constexpr int kPanelColumns = 64;                 // 128 bytes: the TMA box width under SW128
  static constexpr int kPanels = kHeadDim / kPanelColumns;
  static_assert(kHeadDim % kPanelColumns == 0 && kBlockM % 64 == 0 && kBlockN % 16 == 0);

  // Registers per thread after setmaxnreg: the producer warpgroup only issues TMA.
  static constexpr int kProducerRegisters = kConsumerWarpgroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegisters = kConsumerWarpgroups == 2 ? 240 : 160;

  using WarpgroupsAlongM = cute::Layout<cute::Shape<cute::Int<kConsumerWarpgroups>, cute::_1, cute::_1>>;
  // S = Q K^T: (64 x block_n) per warpgroup, k = head_dim; both operands in shared memory.
  using TiledMmaS = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kBlockN>, cute::Int<kHeadDim>>>(),
      WarpgroupsAlongM{}));
  // O += P V: (64 x head_dim) per warpgroup, k = block_n; P from registers, V MN-major.
  using TiledMmaO = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kHeadDim>, cute::Int<kBlockN>>, cute::GMMA::Major::K,
                                 cute::GMMA::Major::MN>(),
      WarpgroupsAlongM{}));

  using SmemLayoutQ = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                                   cute::Shape<cute::Int<kBlockM>, cute::Int<kHeadDim>>{}));
  using SmemLayoutK =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kBlockN>, cute::Int<kHeadDim>, cute::Int<kStages>>{}));
  // V as (head_dim, keys, stage), MN-major, atoms tiled along keys first: the bytes of SmemLayoutK.
  using SmemLayoutVt =
      decltype(cute::tile_to_shape(cute::GMMA::Layout_MN_SW128_Atom<Element>{},
                                   cute::Shape<cute::Int<kHeadDim>, cute::Int<kBlockN>, cute::Int<kStages>>{},
                                   cute::Step<cute::_2, cute::_1, cute::_3>{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;

  struct SharedStorage {
    alignas(1024) Element q[cute::cosize_v<SmemLayoutQ>];
    alignas(1024) Element k[cute::cosize_v<SmemLayoutK>];
    alignas(1024) Element v[cute::cosize_v<SmemLayoutVt>];
    typename Pipeline::SharedStorage k_pipeline;
    typename Pipeline::SharedStorage v_pipeline;
    uint64_t q_full;   // TMA transaction barrier: the Q tile has landed
    uint64_t q_empty;  // every consumer thread has issued its last read of the Q tile
  };
  // The dynamic shared-memory base is rounded up to 1024 bytes (the SW128 pattern's period).
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;
  static_assert(sizeof(SharedStorage) <= forward_tile_bytes(kShape) + 1024, "tile_shape.h and the storage disagree");

  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKeyBlockBytes = kBlockN * kHeadDim * sizeof(Element);
};

}  // namespace dualkv::detail::sm90
