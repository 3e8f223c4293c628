// The frame both sm90 kernels share: warpgroup 0 produces (one thread issues every TMA load), the
// other warpgroups consume; the shared storage at the 1024-byte aligned start of dynamic shared
// memory (the SW128 pattern's period); TMA pipelines whose producer is thread 0 and whose
// consumers are every consumer thread.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include <cstdint>

namespace dualkv::detail::sm90 {

// Config::SharedStorage at the 1024-byte aligned start of the dynamic shared memory (kSmemBytes
// asks 1 KiB more than the storage for this).
template <typename Config>
__device__ __forceinline__ typename Config::SharedStorage& aligned_shared_storage(char* shared_bytes) {
  return *reinterpret_cast<typename Config::SharedStorage*>((reinterpret_cast<uintptr_t>(shared_bytes) + 1023) &
                                                            ~static_cast<uintptr_t>(1023));
}

__device__ __forceinline__ bool is_producer_warpgroup() { return cutlass::canonical_warp_group_idx() == 0; }

// A Config::Pipeline (CUTLASS PipelineTmaAsync) over `storage`, each stage completing after
// `transaction_bytes` of TMA loads.
template <typename Config>
__device__ __forceinline__ typename Config::Pipeline make_tma_pipeline(
    typename Config::Pipeline::SharedStorage& storage, uint32_t transaction_bytes) {
  typename Config::Pipeline::Params params;
  params.transaction_bytes = transaction_bytes;
  params.role =
      is_producer_warpgroup() ? Config::Pipeline::ThreadCategory::Producer : Config::Pipeline::ThreadCategory::Consumer;
  params.is_leader = threadIdx.x == 0;
  params.num_consumers = Config::kConsumerThreads;
  return typename Config::Pipeline(storage, params, cute::Shape<cute::_1, cute::_1, cute::_1>{});
}

// After every barrier is initialised (by thread 0): `produce` on thread 0 with the producer
// warpgroup's registers lowered, `consume` on every consumer thread with theirs raised.
template <typename Config, typename Produce, typename Consume>
__device__ __forceinline__ void run_warp_specialized(const Produce& produce, const Consume& consume) {
  cutlass::arch::fence_barrier_init();
  __syncthreads();
  if (is_producer_warpgroup()) {
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegisters>();
    if (threadIdx.x == 0) produce();
  } else {
    cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegisters>();
    consume();
  }
}

}  // namespace dualkv::detail::sm90
