// Row-predicated copies between global memory and shared-memory tiles. A tile row past the end
// of its range (a short query tile, the last partial key block of a range, the end of the packed
// tensor) is zero-filled instead of loaded: the rows after a range belong to other segments,
// and a NaN there must not reach this tile through 0 * NaN in P V.
#pragma once

#include <cute/tensor.hpp>

namespace dualkv::detail::sm80 {

// Issues cp.async for the rows of `dst` whose row coordinate (from `coords`, the same partition
// of an identity tensor) is below `valid_rows`; clears the others with ordinary stores.
template <typename TiledCopy, typename Src, typename Dst, typename Coords>
__device__ __forceinline__ void load_rows_async(const TiledCopy& copy, const Src& src, Dst& dst, const Coords& coords,
                                                int valid_rows) {
  CUTE_UNROLL
  for (int m = 0; m < cute::size<1>(dst); ++m) {
    if (cute::get<0>(coords(0, m, 0)) < valid_rows) {
      cute::copy(copy, src(cute::_, m, cute::_), dst(cute::_, m, cute::_));
    } else {
      cute::clear(dst(cute::_, m, cute::_));
    }
  }
}

// Stores the rows of `src` (registers) below `valid_rows` to `dst` (global); never touches others.
template <typename TiledCopy, typename Src, typename Dst, typename Coords>
__device__ __forceinline__ void store_rows(const TiledCopy& copy, const Src& src, Dst& dst, const Coords& coords,
                                           int valid_rows) {
  CUTE_UNROLL
  for (int m = 0; m < cute::size<1>(src); ++m) {
    if (cute::get<0>(coords(0, m, 0)) < valid_rows) {
      cute::copy(copy, src(cute::_, m, cute::_), dst(cute::_, m, cute::_));
    }
  }
}

}  // namespace dualkv::detail::sm80
