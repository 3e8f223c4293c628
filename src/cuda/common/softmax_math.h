// Softmax arithmetic every kernel shares, forward and backward, every architecture family. Scores
// stay in raw q.k units and exponentials run on exp2 with the softmax scale pre-multiplied by
// log2(e): exp(scale * s) = exp2(s * scale * log2(e)), one FFMA and one MUFU.EX2 per score.
#pragma once

namespace dualkv::detail {

constexpr float kLog2E = 1.4426950408889634f;  // log2(e)

#if defined(__CUDACC__)
// 2^x on the special-function unit, flushing subnormal results to zero: the softmax needs no
// subnormal probabilities, and the IEEE-exact exp2f costs a compare and two multiplies more.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif

}  // namespace dualkv::detail
