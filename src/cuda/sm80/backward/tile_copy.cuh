// Asynchronous global -> shared copies with row predicates (cp.async, sm80+). Rows past a
// segment's end are zero-filled instead of read: they may lie past the tensor's last token, and
// zeros keep them out of every product (the masks then drop them).
#pragma once

#include <cstdint>
#include <cute/tensor.hpp>

namespace dualkv::sm80 {

using namespace cute;

// A (kRows, kCols) window of a token-major tensor starting at `base`, rows `row_stride` apart.
template <int kRows, int kCols, typename Element>
__device__ __forceinline__ auto global_rows(const Element* base, int64_t row_stride) {
  return make_tensor(make_gmem_ptr(base), make_shape(Int<kRows>{}, Int<kCols>{}), make_stride(row_stride, _1{}));
}

// Issues cp.async for rows [0, valid_rows) of `source` into `target` and zero-fills the others.
template <typename TiledCopy, typename Source, typename Target>
__device__ __forceinline__ void copy_rows_async(const TiledCopy& tiled_copy, const Source& source, Target& target,
                                                int valid_rows) {
  auto thread_copy = tiled_copy.get_thread_slice(threadIdx.x);
  auto src = thread_copy.partition_S(source);
  auto dst = thread_copy.partition_D(target);
  auto rows = thread_copy.partition_S(make_identity_tensor(shape(source)));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(src); ++m) {
    if (get<0>(rows(0, m, 0)) < valid_rows) {
      copy(tiled_copy, src(_, m, _), dst(_, m, _));
    } else {
      clear(dst(_, m, _));
    }
  }
}

// cp.async of one fp32 value; src-size 0 zero-fills without touching global memory.
__device__ __forceinline__ void copy_float_async(float* target, const float* source, bool valid) {
  const auto shared_address = static_cast<uint32_t>(__cvta_generic_to_shared(target));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address), "l"(source), "r"(valid ? 4 : 0));
}

}  // namespace dualkv::sm80
