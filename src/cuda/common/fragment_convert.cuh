// Register-fragment type conversion shared by every kernel family (fp32 accumulators to the 16-bit
// operands of the next MMA or of the output store).
#pragma once

#include <cutlass/array.h>
#include <cutlass/numeric_conversion.h>

#include <cute/tensor.hpp>

namespace dualkv::detail {

// Element-wise conversion into a new register tensor of the same layout (packed cvt instructions).
template <typename To, typename Engine, typename Layout>
__device__ __forceinline__ auto convert_fragment(const cute::Tensor<Engine, Layout>& from) {
  using From = typename Engine::value_type;
  constexpr int kCount = decltype(cute::size(from))::value;
  auto to = cute::make_tensor<To>(from.layout());
  cutlass::NumericArrayConverter<To, From, kCount> convert;
  *reinterpret_cast<cutlass::Array<To, kCount>*>(to.data()) =
      convert(*reinterpret_cast<const cutlass::Array<From, kCount>*>(from.data()));
  return to;
}

}  // namespace dualkv::detail
