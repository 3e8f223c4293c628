// Zeroing whole rows of a 16-bit (rows x d) shared-memory tile in the backward's SW128 layouts
// (config.cuh: d / 64 panels of 128-byte rows). The 128-byte swizzle permutes the 16-byte chunks
// inside a row, so row r of panel p is the 128 contiguous bytes at (p * rows + r) * 128: the tile's
// 16-byte chunk i belongs to row i / 8 % rows, and a row is zeroed by 16-byte stores with no
// swizzle arithmetic (an element-wise loop through the layout cost a partial step about 30 address
// instructions per element). The rule is checked against the layout at compile time.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm90/common/hide_from_hoisting.cuh"

namespace dualkv::detail::sm90 {

template <typename Config, typename Layout, int kRows>
struct RowZeroer {
  using Element = typename Config::Element;
  static constexpr int kChunksPerRow = 128 / 16;
  static constexpr int kChunks = kRows * Config::kPanels * kChunksPerRow;
  static_assert(sizeof(Element) == 2 && kChunks % Config::kConsumerThreads == 0);

  // Byte offset of (row, column) in the tile (the first stage of a staged layout). The layout's
  // swizzle acts on byte addresses, its linear part counts elements.
  static constexpr uint32_t layout_offset(int row, int column) {
    constexpr auto layout = Layout{};
    constexpr int kModes = decltype(cute::rank(layout.layout_b()))::value;
    int elements = 0;
    if constexpr (kModes == 3) {
      elements = layout.layout_b()(row, column, 0);
    } else {
      elements = layout.layout_b()(row, column);
    }
    return static_cast<uint32_t>(layout.layout_a()(elements * static_cast<int>(sizeof(Element))));
  }

  // Checked at each 16-byte chunk's first element (the swizzle moves whole chunks).
  static constexpr bool rows_are_contiguous_128_bytes() {
    for (int row = 0; row < kRows; ++row) {
      for (int column = 0; column < Config::kHeadDim; column += 8) {
        if (layout_offset(row, column) / 128 != static_cast<uint32_t>(column / 64 * kRows + row)) return false;
      }
    }
    return true;
  }

  // Zeroes the rows of the tile at `tile` outside [first_row, end_row), with the consumer
  // threads' stride.
  static __device__ __forceinline__ void zero_outside(Element* tile, int first_row, int end_row, int consumer_thread) {
    static_assert(rows_are_contiguous_128_bytes(), "the row rule disagrees with the tile's layout");
    auto* chunks = reinterpret_cast<uint4*>(tile);
    hide_from_hoisting(consumer_thread);
    CUTE_UNROLL
    for (int i = 0; i < kChunks / Config::kConsumerThreads; ++i) {
      const int chunk = consumer_thread + i * Config::kConsumerThreads;
      const int row = chunk / kChunksPerRow % kRows;
      if (row < first_row || row >= end_row) chunks[chunk] = make_uint4(0, 0, 0, 0);
    }
  }
};

}  // namespace dualkv::detail::sm90
