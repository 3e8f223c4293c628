// Parameters of the forward and backward passes.
#pragma once

#include <cstddef>

#include "dualkv/tensor.h"

namespace dualkv {

// Accumulation precision. kFloat64 exists on the CPU path only (it is the test oracle's mode);
// asking a CUDA run for it is an error.
enum class Accumulation : int { kFloat32, kFloat64 };

// CUDA kernel family. kAuto runs the Hopper kernels (TMA + wgmma, compiled for sm_90a) on a
// compute capability 9.0 GPU when the build has them and they cover the call's dtype and
// head_dim, the portable kernels (mma.sync, sm_80+) otherwise. kPortable and kHopper force one
// family, so one GPU can test both; a forced family the build or the device lacks is an Error
// naming options.kernel_family. Both directions have both families; the deterministic backward
// runs the Hopper KV kernel and the portable query-major dQ kernel.
enum class KernelFamily : int { kAuto, kPortable, kHopper };

// Execution options shared by both directions.
struct ExecutionOptions {
  Accumulation accumulation = Accumulation::kFloat32;
  int cpu_threads = 0;        // CPU path: worker threads; 0 = std::thread::hardware_concurrency()
  void* stream = nullptr;     // CUDA path: a cudaStream_t, passed opaquely; nullptr = default stream
  void* workspace = nullptr;  // CUDA path: device scratch of *_workspace_bytes() bytes
  size_t workspace_bytes = 0;
  // CUDA path: shared memory per block the kernels may use, in bytes; 0 = the device's opt-in
  // limit (a larger value is capped at it). The backward runs the fastest tile shape that fits;
  // 101376 (99 KiB) runs the tiles an sm_86/sm_89 GPU gets, so a large GPU can test them. A
  // limit no compiled kernel fits is an Error naming options.max_shared_memory_per_block.
  size_t max_shared_memory_per_block = 0;
  KernelFamily kernel_family = KernelFamily::kAuto;  // CUDA path only; ignored on the CPU
};

// O = softmax(scale * Q K^T + mask) V per head; query head h reads kv head h / (H / Hk).
// q, out: (T, H, d); k, v: (T, Hk, d); lse: (H, T) fp32. All on one device, one dtype.
// head_dim: any value in [1, 256] on the CPU; the CUDA path supports a compiled set.
struct ForwardParams {
  InputTensor q, k, v;
  OutputTensor out;
  LseOutput lse;
  float softmax_scale = 0.0f;  // must be finite and > 0; see default_softmax_scale()
  ExecutionOptions options{};
};

// Gradients of the forward pass. dq: (T, H, d); dk, dv: (T, Hk, d); each is overwritten (not
// accumulated into). out and lse are those the forward pass returned for the same inputs.
struct BackwardParams {
  InputTensor dout, q, k, v, out;
  LseInput lse;
  OutputTensor dq, dk, dv;
  float softmax_scale = 0.0f;
  // CUDA path: bitwise-identical results on reruns (fixed reduction order). The CPU path is
  // always deterministic.
  bool deterministic = false;
  ExecutionOptions options{};
};

}  // namespace dualkv
