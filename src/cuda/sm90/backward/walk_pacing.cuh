// The producer's side of walk pacing (walk_pacing.h has the rule and why): its CTA's progress slot
// and its predecessor's. Positions are hints that order no data, so the accesses are relaxed and
// unfenced; the producer thread polls with a short sleep while it waits.
#pragma once

#include <cstdint>

#include "cuda/common/backward_kernel_params.h"
#include "cuda/common/query_walk.h"
#include "cuda/sm90/backward/walk_pacing.h"

namespace dualkv::detail::sm90 {

template <int kLeadRows>
struct WalkPacer {
  uint64_t* own;
  const uint64_t* predecessor;  // nullptr: not paced

  __device__ __forceinline__ explicit WalkPacer(const BackwardKernelParams& p)
      : own(p.walk_progress + blockIdx.x), predecessor(nullptr) {
    const int64_t behind = paced_behind(p.key_tiles, blockIdx.x, p.kv_heads);
    if (behind >= 0) predecessor = p.walk_progress + behind;
  }

  // Publishes that the producer is about to load `step`, then waits while walk_waits says so.
  __device__ __forceinline__ void pace(const QueryStep& step) const {
    const uint64_t position = walk_position(step);
    publish(position);
    if (predecessor == nullptr) return;
    while (walk_waits(position, read_predecessor(), kLeadRows)) __nanosleep(100);
  }

  __device__ __forceinline__ void finish() const { publish(kWalkDone); }

 private:
  __device__ __forceinline__ void publish(uint64_t position) const {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(own), "l"(position) : "memory");
  }
  __device__ __forceinline__ uint64_t read_predecessor() const {
    uint64_t position;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(position) : "l"(predecessor) : "memory");
    return position;
  }
};

// Walks not paced: nothing published, nothing awaited.
template <>
struct WalkPacer<0> {
  __device__ __forceinline__ explicit WalkPacer(const BackwardKernelParams& /*p*/) {}
  __device__ __forceinline__ void pace(const QueryStep& /*step*/) const {}
  __device__ __forceinline__ void finish() const {}
};

}  // namespace dualkv::detail::sm90
