// Keeps the compiler from hoisting per-thread index arithmetic out of a kernel's main loop.
//
// The consumers of the sm90 kernels hold their accumulators in nearly all of their 240 registers.
// Index arithmetic inside the loop (the bases of the rare zeroing loops) is loop-invariant, and the
// compiler hoists it into registers the accumulators need, then spills them; recomputing it in the
// loop costs a few integer instructions per pass instead.
#pragma once

namespace dualkv::detail::sm90 {

// Makes `value` opaque to the compiler at this point.
__device__ __forceinline__ void hide_from_hoisting(int& value) { asm volatile("" : "+r"(value)); }

}  // namespace dualkv::detail::sm90
