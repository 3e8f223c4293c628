// Compile-time configuration of the sm80 forward kernel for one (element type, tile shape), the
// shape named by (head_dim, block_m, block_n) in tile_shape.h, the single source of tile sizes:
// the tensor-core MMA,
// shared-memory layouts and the copy engines that move tiles between memories.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/forward/tile_shape.h"
#include "cuda/sm80/mma.cuh"

namespace dualkv::detail::sm80 {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_>
struct ForwardConfig {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr ForwardTileShape kShape = *find_forward_tile_shape(kHeadDim, kBlockM_, kBlockN_);
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kBlockN = kShape.block_n;
  static constexpr int kWarps = kShape.warps;
  static constexpr int kThreads = kWarps * 32;

  // Shared-memory rows are handled in chunks of 64 elements = 128 bytes = all 32 banks.
  static constexpr int kChunk = 64;
  static_assert(kHeadDim % kChunk == 0, "head_dim must be a multiple of 64");
  static_assert(kBlockM % (16 * kWarps) == 0, "each warp owns whole 16-row MMA strips");

  // m16n8k16 tensor-core MMA with fp32 accumulation; warps are stacked along M, so each warp owns
  // kBlockM / kWarps query rows and the softmax of a row never crosses warps.
  using TiledMma = cute::TiledMMA<MmaAtom<Element>, cute::Layout<cute::Shape<cute::Int<kWarps>, cute::_1, cute::_1>>,
                                  cute::Tile<cute::Int<16 * kWarps>, cute::_16, cute::_16>>;

  // Rows in XOR-swizzled 128-byte chunks (mma.cuh): the 8 rows an ldmatrix reads (and the 8 rows
  // a cp.async wave writes) land in 8 different bank groups.
  using SmemLayoutQ = SwizzledRowMajor<kBlockM, kHeadDim>;
  using SmemLayoutKV = SwizzledRowMajor<kBlockN, kHeadDim>;
  // V read as the (head_dim, keys) B operand of O += P V.
  using SmemLayoutVt = TransposedView<SmemLayoutKV, kBlockN, kHeadDim>;

  static constexpr int kSmemQElements = cute::cosize_v<SmemLayoutQ>;
  static constexpr int kSmemKVElements = cute::cosize_v<SmemLayoutKV>;
  static constexpr int kSmemBytes = (kSmemQElements + 2 * kSmemKVElements) * static_cast<int>(sizeof(Element));
  static_assert(kSmemBytes == forward_shared_memory_bytes(kShape), "tile_shape.h and the kernel disagree");

  // shared -> registers: ldmatrix (x4), transposed for V.
  using SmemLoadAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemLoadAtomTransposed = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
  using SmemStoreAtomO = cute::Copy_Atom<cute::AutoVectorizingCopyWithAssumedAlignment<128>, Element>;

  // global <-> shared: each thread moves 16 bytes (8 elements); 8 threads cover one 64-element
  // chunk of a row, so a warp writes 4 rows x 128 bytes of shared memory per wave.
  static constexpr int kElementsPerVector = 16 / static_cast<int>(sizeof(Element));
  static constexpr int kThreadsPerChunk = kChunk / kElementsPerVector;
  using GmemThreadLayout =
      cute::Layout<cute::Shape<cute::Int<kThreads / kThreadsPerChunk>, cute::Int<kThreadsPerChunk>>,
                   cute::Stride<cute::Int<kThreadsPerChunk>, cute::_1>>;
  using GmemVectorLayout = cute::Layout<cute::Shape<cute::_1, cute::Int<kElementsPerVector>>>;
  // cp.async.cg: K/V are streamed once per CTA, so they bypass L1.
  using GmemLoad =
      decltype(cute::make_tiled_copy(cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{},
                                     GmemThreadLayout{}, GmemVectorLayout{}));
  using GmemStore =
      decltype(cute::make_tiled_copy(cute::Copy_Atom<cute::AutoVectorizingCopyWithAssumedAlignment<128>, Element>{},
                                     GmemThreadLayout{}, GmemVectorLayout{}));
};

}  // namespace dualkv::detail::sm80
