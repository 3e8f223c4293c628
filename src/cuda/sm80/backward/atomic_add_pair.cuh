// Atomic accumulation of two adjacent fp32 values: the unit an m16n8 accumulator fragment holds
// per row and column block, so the atomic dQ epilogue needs no register shuffles.
#pragma once

namespace dualkv::detail::sm80 {

// *address += first, *(address + 1) += second; address must be 8-byte aligned. sm90 has a
// vector reduction (one red.global.add.v2.f32): half the instructions, and each 32-byte L2
// sector a warp touches is updated once instead of twice by two half-filled requests. Older
// architectures add the two values separately.
__device__ __forceinline__ void atomic_add_pair(float* address, float first, float second) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(address), make_float2(first, second));
#else
  atomicAdd(address, first);
  atomicAdd(address + 1, second);
#endif
}

}  // namespace dualkv::detail::sm80
