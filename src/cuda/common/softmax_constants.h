// Constants of the softmax shared by every kernel family and both directions.
#pragma once

namespace dualkv::detail {

// log2(e): kernels compute exp(x) as exp2(x * log2(e)), one FFMA and one MUFU.EX2.
constexpr float kLog2E = 1.4426950408889634f;

}  // namespace dualkv::detail
