// Row-predicated copies between global memory and shared-memory tiles (cp.async, sm80+), for both
// directions. A tile row outside its range (past a short query tile's end, the last partial key
// block of a range, the end of the packed tensor; before a response's first query where a
// backward query step starts in the previous response) is zero-filled instead of loaded: those
// rows belong to other segments (or lie past the tensor's last token), and a NaN there must not
// reach this tile through 0 * NaN in a product; the masks then drop those rows.
#pragma once

#include <cstdint>
#include <cute/tensor.hpp>

namespace dualkv::detail::sm80 {

// Issues cp.async for the rows of `dst` whose row coordinate (from `coords`, the same partition
// of an identity tensor) is in [first_valid_row, valid_rows); clears the others with ordinary
// stores.
template <typename TiledCopy, typename Src, typename Dst, typename Coords>
__device__ __forceinline__ void load_rows_async(const TiledCopy& copy, const Src& src, Dst& dst, const Coords& coords,
                                                int valid_rows, int first_valid_row = 0) {
  CUTE_UNROLL
  for (int m = 0; m < cute::size<1>(dst); ++m) {
    const int row = cute::get<0>(coords(0, m, 0));
    if (row >= first_valid_row && row < valid_rows) {
      cute::copy(copy, src(cute::_, m, cute::_), dst(cute::_, m, cute::_));
    } else {
      cute::clear(dst(cute::_, m, cute::_));
    }
  }
}

// A (kRows, kCols) window of a token-major tensor starting at `base`, rows `row_stride` apart.
template <int kRows, int kCols, typename Element>
__device__ __forceinline__ auto global_rows(const Element* base, int64_t row_stride) {
  return cute::make_tensor(cute::make_gmem_ptr(base), cute::make_shape(cute::Int<kRows>{}, cute::Int<kCols>{}),
                           cute::make_stride(row_stride, cute::_1{}));
}

// load_rows_async for whole tiles: partitions `source` and `target` for this thread first.
template <typename TiledCopy, typename Source, typename Target>
__device__ __forceinline__ void copy_rows_async(const TiledCopy& tiled_copy, const Source& source, Target& target,
                                                int valid_rows, int first_valid_row = 0) {
  auto thread_copy = tiled_copy.get_thread_slice(threadIdx.x);
  auto destination = thread_copy.partition_D(target);
  load_rows_async(tiled_copy, thread_copy.partition_S(source), destination,
                  thread_copy.partition_S(cute::make_identity_tensor(cute::shape(source))), valid_rows,
                  first_valid_row);
}

// cp.async of one fp32 value; src-size 0 zero-fills without touching global memory.
__device__ __forceinline__ void copy_float_async(float* target, const float* source, bool valid) {
  const auto shared_address = static_cast<uint32_t>(__cvta_generic_to_shared(target));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address), "l"(source), "r"(valid ? 4 : 0));
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
