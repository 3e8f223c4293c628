// Compile-time configuration of the sm80 backward kernels: MMA atoms, tiled MMAs, shared-memory
// layouts and copy atoms for one (element type, head_dim) pair. Tile sizes come from the shape
// table (tile_shapes.h) the entry point chooses from, so the host and the kernels cannot disagree.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/backward/tile_shapes.h"
#include "cuda/sm80/mma.cuh"

namespace dualkv::detail::sm80 {

using namespace cute;

// Global -> shared copy of (rows, kHeadDim) tiles: 16-byte cp.async, kHeadDim / 8 threads per row.
template <typename Element, int kThreads, int kHeadDim>
using RowTileCopy = decltype(make_tiled_copy(
    Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, Element>{},
    cute::Layout<Shape<Int<kThreads / (kHeadDim / 8)>, Int<kHeadDim / 8>>, Stride<Int<kHeadDim / 8>, _1>>{},
    cute::Layout<Shape<_1, _8>>{}));

// One compiled tile shape of tile_shapes.h, named by (head_dim, key_block, query_block).
template <typename Element_, int kHeadDim_, int kKeyBlock_, int kQueryBlock_>
struct BackwardTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr BackwardTileShape kShape = *find_backward_tile_shape(kHeadDim, kKeyBlock_, kQueryBlock_);
  static_assert(kHeadDim % 64 == 0, "head_dim tiles use the 128-byte swizzle atom");

  using MmaAtom = sm80::MmaAtom<Element>;
  using LoadA = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using LoadTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  using StorePair = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<32>, Element>;

  // ---- KV-major kernel (dK, dV, and atomic dQ) ----
  static constexpr int kKeyBlock = kShape.key_block;
  static constexpr int kQueryBlock = kShape.query_block;
  static constexpr int kQueryStages = kShape.query_stages;
  static constexpr int kKvWarps = kShape.kv_warps;
  static constexpr int kKvThreads = kKvWarps * 32;
  // Every GEMM of the KV-major kernel (S^T, dP^T: key x query; dV, dK: key x d; dQ: query x d)
  // uses one 2-D warp grid, 2 warps along the second dimension: each warp then reads half of the
  // B operand per k-slice, which keeps operand fragments small next to the dK/dV accumulators.
  static constexpr int kKvWarpsN = 2;
  static constexpr int kKvWarpsM = kKvWarps / kKvWarpsN;
  using KvMma = TiledMMA<MmaAtom, cute::Layout<Shape<Int<kKvWarpsM>, Int<kKvWarpsN>, _1>>,
                         Tile<Int<16 * kKvWarpsM>, Int<16 * kKvWarpsN>, _16>>;

  // The atomic-mode dQ GEMM (query x d) has only kQueryBlock rows: on the grid above a warp's
  // tile would be 16 x (d / 2), reading 5 ldmatrix.x4 per 8 MMAs at d = 128; a 2 x (kKvWarps / 2)
  // grid gives 32 x 32 tiles at 4 per 8 MMAs with the same accumulator size per thread.
  static constexpr int kKvDqWarpsM = 2;
  static constexpr int kKvDqWarpsN = kKvWarps / kKvDqWarpsM;
  using KvDqMma = TiledMMA<MmaAtom, cute::Layout<Shape<Int<kKvDqWarpsM>, Int<kKvDqWarpsN>, _1>>,
                           Tile<Int<16 * kKvDqWarpsM>, Int<16 * kKvDqWarpsN>, _16>>;

  using SmemKey = SwizzledRowMajor<kKeyBlock, kHeadDim>;
  using SmemKeyT = TransposedView<SmemKey, kKeyBlock, kHeadDim>;
  using SmemQuery = SwizzledRowMajor<kQueryBlock, kHeadDim>;
  using SmemQueryT = TransposedView<SmemQuery, kQueryBlock, kHeadDim>;
  // P^T and dS^T are stored (key, query): the A operands of dV and dK. The dQ GEMM reads dS^T
  // as (query, key).
  using SmemScoreT = SwizzledRowMajor<kKeyBlock, kQueryBlock>;
  using SmemScore = TransposedView<SmemScoreT, kKeyBlock, kQueryBlock>;
  using KvTileCopy = RowTileCopy<Element, kKvThreads, kHeadDim>;

  // ---- deterministic dQ kernel ----
  static constexpr int kDqQueryBlock = kShape.dq_query_block;
  static constexpr int kDqKeyBlock = kShape.dq_key_block;
  static constexpr int kDqWarps = kDqQueryBlock / 16;
  static constexpr int kDqThreads = kDqWarps * 32;
  using DqMma = TiledMMA<MmaAtom, cute::Layout<Shape<Int<kDqWarps>, _1, _1>>, Tile<Int<16 * kDqWarps>, _16, _16>>;
  using DqSmemQuery = SwizzledRowMajor<kDqQueryBlock, kHeadDim>;
  using DqSmemKey = SwizzledRowMajor<kDqKeyBlock, kHeadDim>;
  using DqSmemKeyT = TransposedView<DqSmemKey, kDqKeyBlock, kHeadDim>;
  using DqTileCopy = RowTileCopy<Element, kDqThreads, kHeadDim>;

  static_assert(kKeyBlock % kQueryBlock == 0, "query tiles must align with key tiles");
  static_assert(kKeyBlock % (16 * kKvWarpsM) == 0 && kQueryBlock % (16 * kKvWarpsN) == 0 &&
                    kQueryBlock % (16 * kKvDqWarpsM) == 0 && kHeadDim % (16 * kKvDqWarpsN) == 0,
                "the warp grids tile every KV-major GEMM");
  static_assert(kQueryStages == 1 || kQueryStages == 2, "one or two Q/dO buffers");
  static_assert(kQueryBlock % 32 == 0, "score tiles use a 32- or 64-column swizzle atom");
  static_assert(2 * kQueryBlock <= kKvThreads, "one thread per LSE and per D value of a query tile");
  static_assert(kKvWarps % 2 == 0, "two warp columns");
  // A cp.async wave of RowTileCopy covers whole rows, and every tile whole waves.
  static constexpr int kKvRowsPerWave = kKvThreads / (kHeadDim / 8);
  static constexpr int kDqRowsPerWave = kDqThreads / (kHeadDim / 8);
  static_assert(kKvRowsPerWave > 0 && kKeyBlock % kKvRowsPerWave == 0 && kQueryBlock % kKvRowsPerWave == 0 &&
                    kDqRowsPerWave > 0 && kDqQueryBlock % kDqRowsPerWave == 0 && kDqKeyBlock % kDqRowsPerWave == 0,
                "cp.async waves tile every (rows, head_dim) tile");
  static_assert(kQueryBlock % 16 == 0 && kDqKeyBlock % 16 == 0, "MMA K is 16");
};

}  // namespace dualkv::detail::sm80
