// Register-fragment plumbing for warpgroup MMA (wgmma) accumulators: views by (row, column), the
// S accumulator reused as the register A operand of O += P V, and the GEMM issue helper.
//
// A 64 x N fp32 wgmma accumulator gives each thread ((2, 2, N / 8), MMA_M, MMA_N) values:
// (column pair, row +0/+8, 8-column group). Thread t of warp w holds rows 16w + t/4 (+8) and
// columns 8j + 2(t%4) (+1), so the 4 lanes of a quad share a row.
#pragma once

#include <cutlass/cutlass.h>

#include <cute/tensor.hpp>

#include "cuda/common/fragment_convert.cuh"

namespace dualkv::detail::sm90 {

// ((2, 2, V), M, N) -> ((2, M), (2, V, N)): rows by columns of this thread's values.
template <typename Layout>
__device__ __forceinline__ constexpr auto accumulator_rows_by_columns(Layout accumulator) {
  static_assert(decltype(cute::rank<0>(accumulator))::value == 3);
  return cute::make_layout(
      cute::make_layout(cute::get<0, 1>(accumulator), cute::get<1>(accumulator)),
      cute::make_layout(cute::get<0, 0>(accumulator), cute::get<0, 2>(accumulator), cute::get<2>(accumulator)));
}

// A thread's values for two neighbouring 8-column groups of the accumulator are exactly its
// register A operand for one k16 step of the next wgmma (same rows, 16 consecutive columns):
// ((2, 2, V), M, N) -> ((2, 2, 2), M, (V / 2, N)).
template <typename Layout>
__device__ __forceinline__ constexpr auto accumulator_as_operand_a(Layout accumulator) {
  const auto groups =
      cute::logical_divide(cute::get<0>(accumulator), cute::Shape<cute::Underscore, cute::Underscore, cute::_2>{});
  return cute::make_layout(cute::make_layout(cute::get<0>(groups), cute::get<1>(groups), cute::get<2, 0>(groups)),
                           cute::get<1>(accumulator),
                           cute::coalesce(cute::make_layout(cute::get<2, 1>(groups), cute::get<2>(accumulator))));
}

// The slice of `mma` that partitions its shared-memory operands (descriptors) for this thread's
// consumer warpgroup, in kernels whose warpgroup 0 produces. Descriptors depend only on the
// warpgroup; slicing by its first thread, computed from a warp-uniform index, keeps them in
// uniform registers: no vector temporaries before each HGMMA.
template <typename TiledMma>
__device__ __forceinline__ auto consumer_operand_slice(const TiledMma& mma) {
  return mma.get_thread_slice(128 * (cutlass::canonical_warp_group_idx() - 1));
}

// Issues acc (+)= A B over every k step as one wgmma batch and commits it; waits until at most
// kPendingBatches batches are in flight (-1: no wait). kZeroInit overwrites acc instead of
// accumulating. The operand fences keep the compiler from moving register reads or writes of A
// and acc across the asynchronous MMA.
template <bool kZeroInit, int kPendingBatches, typename TiledMma, typename FragmentA, typename FragmentB,
          typename Accumulator>
__device__ __forceinline__ void warpgroup_gemm(TiledMma& mma, const FragmentA& a, const FragmentB& b,
                                               Accumulator& acc) {
  constexpr bool kAInRegisters = !std::is_same_v<typename FragmentA::iterator, cute::GMMA::DescriptorIterator>;
  if constexpr (kAInRegisters) cute::warpgroup_fence_operand(const_cast<FragmentA&>(a));
  cute::warpgroup_fence_operand(acc);
  cute::warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = cute::GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < cute::size<2>(a); ++k) {
    cute::gemm(mma, a(cute::_, cute::_, k), b(cute::_, cute::_, k), acc);
    mma.accumulate_ = cute::GMMA::ScaleOut::One;
  }
  cute::warpgroup_commit_batch();
  if constexpr (kPendingBatches >= 0) cute::warpgroup_wait<kPendingBatches>();
  cute::warpgroup_fence_operand(acc);
  if constexpr (kAInRegisters) cute::warpgroup_fence_operand(const_cast<FragmentA&>(a));
}

}  // namespace dualkv::detail::sm90
