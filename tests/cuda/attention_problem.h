// One attention problem of the GPU suite: its packed batch and head counts, the host copies of
// every tensor in a chosen memory placement, their device mirrors, and the two references that
// do not involve the library's kernels (the CPU path in fp64, the N-copy GPU reference).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cpu/batch_spec.h"
#include "cpu/oracle_attention.h"
#include "cpu/oracle_ncopy.h"
#include "cpu/test_support.h"
#include "cpu/tree_spec.h"
#include "device_memory.h"
#include "dualkv/dualkv.h"
#include "reference_attention.h"

namespace dualkv_test {

enum class Placement {
  // Every tensor in its own exactly-sized allocation, (tokens, heads, head_dim) contiguous.
  kContiguous,
  // q/k/v are slices of one fused QKV buffer and dq/dk/dv of one fused gradient buffer
  // (token stride (H + 2 Hk) d); out and dout are head-major with padded rows; the LSE has a
  // padded head stride. Padding is poisoned, so a stray read shows up as NaN and a stray write
  // as a changed poison pattern.
  kFusedAndHeadMajor,
};

struct AttentionCase {
  std::string name;
  BatchSpec batch;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  Placement placement = Placement::kContiguous;
  TreeSpec tree;  // when it has segments, the layout is this tree and `batch` is unused
};

// The case's layout, and the sequences of its N-copy reference (ncopy_reference.h): the batch's
// prompts and copies, or the tree's root-to-leaf paths.
dualkv::Layout layout_of(const AttentionCase& problem);
std::vector<oracle::CopiedSequence> reference_sequences_of(const AttentionCase& problem);

// Host views of every tensor of one problem; all storage starts poisoned.
struct HostTensors {
  StridedTensor q, k, v, dout, out, dq, dk, dv;
  LseBuffer lse;

  // Every view, and the distinct storages behind them.
  std::vector<const StridedTensor*> views() const;
  std::vector<std::shared_ptr<Storage>> storages() const;
};

HostTensors make_host_tensors(Placement placement, dualkv::DType dtype, int64_t tokens, int64_t heads, int64_t kv_heads,
                              int64_t head_dim);

// Device copies of every storage of `host`, at the same element offsets, so that the host views
// describe the device memory too. Uploads everything on construction.
class DeviceTensors {
 public:
  explicit DeviceTensors(HostTensors& host);

  // Whole storages move, padding included (the padding is part of what the tests check).
  void upload(const StridedTensor& view);
  void download(const StridedTensor& view);
  void upload_lse();
  void download_lse();

  dualkv::InputTensor input(const StridedTensor& view) const;
  dualkv::OutputTensor output(const StridedTensor& view) const;
  dualkv::LseInput lse_input() const;
  dualkv::LseOutput lse_output() const;

 private:
  DeviceBytes& memory_of(const StridedTensor& view) const;

  HostTensors& host_;
  std::vector<std::pair<const Storage*, std::unique_ptr<DeviceBytes>>> storages_;
  DeviceBytes lse_;
};

dualkv::ForwardParams device_forward_params(const DeviceTensors& device, const HostTensors& host, float scale);
dualkv::BackwardParams device_backward_params(const DeviceTensors& device, const HostTensors& host, float scale,
                                              bool deterministic);

// Allocate exactly the workspace the library asks for, run on a fresh stream, wait for it.
void run_on_device(const dualkv::Layout& layout, dualkv::ForwardParams params);
void run_on_device(const dualkv::Layout& layout, dualkv::BackwardParams params);

// The library's CPU path with fp64 accumulation on fp32 copies of the (dtype-exact) inputs.
oracle::ForwardResult cpu_fp64_forward(const dualkv::Layout& layout, const oracle::DenseTensor& q,
                                       const oracle::DenseTensor& k, const oracle::DenseTensor& v, float scale);
oracle::Gradients cpu_fp64_backward(const dualkv::Layout& layout, const oracle::DenseTensor& q,
                                    const oracle::DenseTensor& k, const oracle::DenseTensor& v,
                                    const oracle::DenseTensor& out, const oracle::DenseTensor& lse,
                                    const oracle::DenseTensor& dout, float scale);

// What a tensor-core kernel working in `dtype` rounds its matrix operands to.
cuda_reference::OperandRounding operand_rounding(dualkv::DType dtype);

// Each value rounded to the nearest `dtype` value, as a kernel's final store does.
oracle::DenseTensor rounded_to(const oracle::DenseTensor& tensor, dualkv::DType dtype);

}  // namespace dualkv_test
