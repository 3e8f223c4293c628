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
// The offset is added to the array itself, not to an integer copy of its address: the compiler
// then still knows every pointer into the storage is a shared-memory pointer and emits LDS/STS
// with 32-bit addresses instead of generic 64-bit LD/ST.
template <typename Config>
__device__ __forceinline__ typename Config::SharedStorage& aligned_shared_storage(char* shared_bytes) {
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(shared_bytes));
  return *reinterpret_cast<typename Config::SharedStorage*>(shared_bytes + ((0u - address) & 1023u));
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

// setmaxnreg moves registers inside the CTA's own allocation (SASS: USETMAXREG ... CTAPOOL), which
// __launch_bounds__(kThreads, 1) sets at 64 Ki / kThreads per thread, rounded down to 8: the
// warpgroups' new counts must fit it, or the consumers' setmaxnreg.inc waits forever (a hang, seen
// with 32 + 2 x 240 at 384 threads).
template <typename Config>
constexpr bool register_split_fits_allocation() {
  constexpr int kLaunchRegisters = 65536 / Config::kThreads / 8 * 8;
  return Config::kProducerRegisters + Config::kConsumerWarpgroups * Config::kConsumerRegisters <=
         (Config::kConsumerWarpgroups + 1) * kLaunchRegisters;
}

// After every barrier is initialised (by thread 0): `produce` on every thread of the producer
// warpgroup (a kernel picks the threads that work: thread 0 issues the loads) with its registers
// lowered, `consume` on every consumer thread with theirs raised.
template <typename Config, typename Produce, typename Consume>
__device__ __forceinline__ void run_warp_specialized(const Produce& produce, const Consume& consume) {
  static_assert(Config::kThreads == 128 * (Config::kConsumerWarpgroups + 1) && register_split_fits_allocation<Config>(),
                "producer + consumer registers per thread exceed what the launch allocates");
  cutlass::arch::fence_barrier_init();
  __syncthreads();
  if (is_producer_warpgroup()) {
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegisters>();
    produce();
  } else {
    cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegisters>();
    consume();
  }
}

}  // namespace dualkv::detail::sm90
