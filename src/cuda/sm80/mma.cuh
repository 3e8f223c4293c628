// The m16n8k16 tensor-core MMA (mma.sync) as both directions of the sm80 kernels use it: the MMA
// atom of each 16-bit element type, the swizzled shared-memory layouts its ldmatrix operands are
// read from, views of an accumulator by (row, column), the accumulator reused as the A operand of
// the next MMA, fp32 -> 16-bit conversion, and the two GEMM shapes of attention (both operands in
// shared memory; A already in registers), each pipelining the ldmatrix of k-step s + 1 behind the
// MMA of step s.
#pragma once

#include <cutlass/numeric_types.h>

#include <cute/tensor.hpp>
#include <type_traits>

#include "cuda/common/fragment_convert.cuh"

namespace dualkv::detail::sm80 {

// fp32 accumulation for fp16 and bf16 operands.
template <typename Element>
using MmaAtom =
    std::conditional_t<std::is_same_v<Element, cutlass::half_t>, cute::MMA_Atom<cute::SM80_16x8x16_F32F16F16F32_TN>,
                       cute::MMA_Atom<cute::SM80_16x8x16_F32BF16BF16F32_TN>>;

// Row-major (rows, cols) tile of 16-bit elements, swizzled so that ldmatrix of 8 rows x 16 bytes
// (and a cp.async wave writing 8 rows) touches 8 distinct bank groups. In the 64-column atom rows
// are 128 bytes apart and the 3-bit XOR swizzle of 16-byte units spreads 8 rows over the 8 groups;
// a 32-column tile (the (key, query) scores of the backward's 32-query shape) has two 64-byte rows
// per 128 bytes, and a 2-bit swizzle of row pairs does it.
template <int kCols>
using SwizzleAtom = std::conditional_t<
    kCols % 64 == 0,
    decltype(cute::composition(cute::Swizzle<3, 3, 3>{},
                               cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{})),
    decltype(cute::composition(cute::Swizzle<2, 3, 3>{},
                               cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>{}))>;

template <int kRows, int kCols>
using SwizzledRowMajor =
    decltype(cute::tile_to_shape(SwizzleAtom<kCols>{}, cute::Shape<cute::Int<kRows>, cute::Int<kCols>>{}));

// The (kCols, kRows) view of a (kRows, kCols) shared-memory layout: element (c, r) is (r, c). The
// same bytes, read transposed (e.g. V as the (head_dim, keys) B operand of O += P V).
template <typename RowLayout, int kRows, int kCols>
using TransposedView = decltype(cute::composition(
    RowLayout{}, cute::make_layout(cute::Shape<cute::Int<kCols>, cute::Int<kRows>>{}, cute::GenRowMajor{})));

// An m16n8 accumulator fragment holds 4 values per thread: (row r, cols c, c+1) and (row r+8,
// cols c, c+1). Viewing mode 0 as (column pair, row pair) gives an accumulator
// (4, MMA_M, MMA_N) as ((2, MMA_M), (2, MMA_N)): rows by columns of this thread's values.
template <typename Layout>
__device__ __forceinline__ constexpr auto accumulator_rows_by_columns(Layout accumulator) {
  static_assert(decltype(cute::size<0>(accumulator))::value == 4);
  static_assert(decltype(cute::rank(accumulator))::value == 3);
  const auto pairs = cute::logical_divide(accumulator, cute::Shape<cute::_2>{});  // ((2, 2), M, N)
  return cute::make_layout(cute::make_layout(cute::get<0, 1>(pairs), cute::get<1>(pairs)),
                           cute::make_layout(cute::get<0, 0>(pairs), cute::get<2>(pairs)));
}

// The values a thread holds for two neighbouring n8 accumulator tiles are exactly the values it
// must supply as the A operand of one k16 MMA step (same rows, 16 consecutive columns), so
// P = softmax(S) feeds O += P V without leaving registers: (4, M, N) -> ((4, 2), M, N / 2).
template <typename Layout>
__device__ __forceinline__ constexpr auto accumulator_as_operand_a(Layout accumulator) {
  static_assert(decltype(cute::size<0>(accumulator))::value == 4);
  static_assert(decltype(cute::size<2>(accumulator))::value % 2 == 0, "k-steps are 16 columns");
  const auto steps = cute::logical_divide(accumulator, cute::Shape<cute::Underscore, cute::Underscore, cute::_2>{});
  return cute::make_layout(cute::make_layout(cute::get<0>(steps), cute::get<2, 0>(steps)), cute::get<1>(steps),
                           cute::get<2, 1>(steps));
}

// acc += A B^T with A and B in shared memory. a/b: MMA fragments; a_smem/b_smem: the ldmatrix
// partitions of shared memory matching them.
template <typename TiledMma, typename Accumulator, typename FragmentA, typename FragmentB, typename SmemA,
          typename SmemB, typename CopyA, typename CopyB>
__device__ __forceinline__ void gemm_from_shared(const TiledMma& mma, Accumulator& acc, FragmentA& a, FragmentB& b,
                                                 const SmemA& a_smem, const SmemB& b_smem, const CopyA& copy_a,
                                                 const CopyB& copy_b) {
  auto a_view = copy_a.get_thread_slice(threadIdx.x).retile_D(a);  // register views in copy order
  auto b_view = copy_b.get_thread_slice(threadIdx.x).retile_D(b);
  constexpr int kSteps = decltype(cute::size<2>(a))::value;
  cute::copy(copy_a, a_smem(cute::_, cute::_, 0), a_view(cute::_, cute::_, 0));
  cute::copy(copy_b, b_smem(cute::_, cute::_, 0), b_view(cute::_, cute::_, 0));
  CUTE_UNROLL
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      cute::copy(copy_a, a_smem(cute::_, cute::_, step + 1), a_view(cute::_, cute::_, step + 1));
      cute::copy(copy_b, b_smem(cute::_, cute::_, step + 1), b_view(cute::_, cute::_, step + 1));
    }
    cute::gemm(mma, a(cute::_, cute::_, step), b(cute::_, cute::_, step), acc);
  }
}

// acc += A B^T with A already in registers and B in shared memory.
template <typename TiledMma, typename Accumulator, typename FragmentA, typename FragmentB, typename SmemB,
          typename CopyB>
__device__ __forceinline__ void gemm_a_in_registers(const TiledMma& mma, Accumulator& acc, const FragmentA& a,
                                                    FragmentB& b, const SmemB& b_smem, const CopyB& copy_b) {
  auto b_view = copy_b.get_thread_slice(threadIdx.x).retile_D(b);
  constexpr int kSteps = decltype(cute::size<2>(a))::value;
  cute::copy(copy_b, b_smem(cute::_, cute::_, 0), b_view(cute::_, cute::_, 0));
  CUTE_UNROLL
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      cute::copy(copy_b, b_smem(cute::_, cute::_, step + 1), b_view(cute::_, cute::_, step + 1));
    }
    cute::gemm(mma, a(cute::_, cute::_, step), b(cute::_, cute::_, step), acc);
  }
}

}  // namespace dualkv::detail::sm80
