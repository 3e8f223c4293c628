// TMA loads of (rows x head_dim) tiles of a 16-bit (tokens, heads, head_dim) tensor into shared
// memory as head_dim / 64 panels of 128-byte swizzled rows (the layout both sm90 kernels' configs
// describe), one box per panel, completing on one transaction barrier.
#pragma once

#include <cute/arch/copy_sm90_tma.hpp>

namespace dualkv::detail::sm90 {

constexpr auto kEvictFirst = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_FIRST);
constexpr auto kEvictLast = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_LAST);

// One TMA load of a (rows x d) tile at token `row` of `head`: Config::kPanels boxes.
template <typename Config>
__device__ __forceinline__ void load_tile(const CUtensorMap* map, uint64_t* barrier, typename Config::Element* smem,
                                          int rows, int head, int row, uint64_t cache_hint) {
  CUTE_UNROLL
  for (int panel = 0; panel < Config::kPanels; ++panel) {
    cute::SM90_TMA_LOAD_3D::copy(map, barrier, cache_hint, smem + panel * rows * Config::kPanelColumns,
                                 panel * Config::kPanelColumns, head, row);
  }
}

}  // namespace dualkv::detail::sm90
