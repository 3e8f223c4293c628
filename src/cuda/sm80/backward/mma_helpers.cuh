// Register-fragment helpers for SM80 mma.sync (m16n8k16) through CuTe: shared->register GEMMs
// with the next k-slice's ldmatrix issued before the current slice's MMAs, and the reshaping of an
// fp32 accumulator into the A operand of the next GEMM.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace dualkv::sm80 {

using namespace cute;

// acc += A * B with both operands in shared memory. tAsA / tBsB are the copy partitions of
// the shared tiles; tArA / tBrB the MMA fragments (whose copy views are retiled here).
template <typename TiledMma, typename Acc, typename FragA, typename FragB, typename SmemA,
          typename SmemB, typename CopyA, typename CopyB>
__device__ __forceinline__ void gemm_smem_smem(const TiledMma& mma, Acc& acc, FragA& tArA,
                                               FragB& tBrB, const SmemA& tAsA, const SmemB& tBsB,
                                               const CopyA& copy_a, const CopyB& copy_b) {
  auto a_view = copy_a.get_thread_slice(threadIdx.x).retile_D(tArA);
  auto b_view = copy_b.get_thread_slice(threadIdx.x).retile_D(tBrB);
  constexpr int kSlices = decltype(size<2>(tArA))::value;
  copy(copy_a, tAsA(_, _, _0{}), a_view(_, _, _0{}));
  copy(copy_b, tBsB(_, _, _0{}), b_view(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < kSlices; ++k) {
    if (k + 1 < kSlices) {
      copy(copy_a, tAsA(_, _, k + 1), a_view(_, _, k + 1));
      copy(copy_b, tBsB(_, _, k + 1), b_view(_, _, k + 1));
    }
    cute::gemm(mma, tArA(_, _, k), tBrB(_, _, k), acc);
  }
}

// acc += A * B with A already in registers (an earlier GEMM's converted accumulator).
template <typename TiledMma, typename Acc, typename FragA, typename FragB, typename SmemB,
          typename CopyB>
__device__ __forceinline__ void gemm_reg_smem(const TiledMma& mma, Acc& acc, const FragA& tArA,
                                              FragB& tBrB, const SmemB& tBsB,
                                              const CopyB& copy_b) {
  auto b_view = copy_b.get_thread_slice(threadIdx.x).retile_D(tBrB);
  constexpr int kSlices = decltype(size<2>(tArA))::value;
  copy(copy_b, tBsB(_, _, _0{}), b_view(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < kSlices; ++k) {
    if (k + 1 < kSlices) copy(copy_b, tBsB(_, _, k + 1), b_view(_, _, k + 1));
    cute::gemm(mma, tArA(_, _, k), tBrB(_, _, k), acc);
  }
}

// An m16n8k16 accumulator fragment ((2,2), MMA_M, MMA_N) covers, per thread, two rows and two
// adjacent columns of each 16x8 block. Two column-adjacent blocks (n, n+1) hold exactly the values
// an A fragment of one 16x16 k-slice needs, in the same order, so the A view is a regrouping:
// ((2,2), MMA_M, (2, MMA_N/2)) -> ((2,2,2), MMA_M, MMA_N/2).
template <typename AccLayout>
__device__ __forceinline__ auto accumulator_as_a_operand(AccLayout acc) {
  static_assert(decltype(size<0>(acc))::value == 4, "m16n8 accumulator");
  static_assert(decltype(size<2>(acc))::value % 2 == 0, "k-slices are 16 columns");
  auto split = logical_divide(acc, Shape<Underscore, Underscore, _2>{});
  return make_layout(make_layout(get<0>(split), get<2, 0>(split)), get<1>(split),
                     get<2, 1>(split));
}

// Element-wise conversion of a register fragment (fp32 accumulators to 16-bit operands).
template <typename To, typename Fragment>
__device__ __forceinline__ auto convert_fragment(const Fragment& source) {
  using From = typename Fragment::value_type;
  constexpr int kCount = decltype(size(source))::value;
  cutlass::NumericArrayConverter<To, From, kCount> convert;
  auto converted = make_tensor<To>(source.layout());
  *reinterpret_cast<cutlass::Array<To, kCount>*>(converted.data()) =
      convert(*reinterpret_cast<const cutlass::Array<From, kCount>*>(source.data()));
  return converted;
}

}  // namespace dualkv::sm80
