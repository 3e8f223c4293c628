// The CUTLASS element type of each 16-bit DType the kernels are compiled for.
#pragma once

#include <cutlass/numeric_types.h>

#include "dualkv/tensor.h"

namespace dualkv::detail {

template <DType kDType>
struct CudaElement;

template <>
struct CudaElement<DType::kFloat16> {
  using type = cutlass::half_t;
};

template <>
struct CudaElement<DType::kBFloat16> {
  using type = cutlass::bfloat16_t;
};

template <DType kDType>
using CudaElementT = typename CudaElement<kDType>::type;

}  // namespace dualkv::detail
