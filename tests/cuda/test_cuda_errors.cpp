// Bad input that only the CUDA path can reject: each must be a dualkv::Error naming the
// argument, raised before anything runs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_problem.h"

namespace dualkv_test {
namespace {

using dualkv::DType;

template <typename Call>
::testing::AssertionResult error_naming(const std::string& argument, Call&& call) {
  try {
    call();
  } catch (const dualkv::Error& error) {
    if (error.argument() == argument) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "Error names '" << error.argument() << "' instead: " << error.what();
  } catch (const std::exception& other) {
    return ::testing::AssertionFailure() << "threw something other than dualkv::Error: " << other.what();
  }
  return ::testing::AssertionFailure() << "no error";
}

const BatchSpec kBatch = {{17, {5, 1}}, {3, {9}}};
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;

// A valid problem on the device, at a chosen head dim.
class Problem {
 public:
  explicit Problem(int64_t head_dim, DType dtype = DType::kFloat16)
      : layout(make_layout(kBatch)),
        host(make_host_tensors(Placement::kContiguous, dtype, layout.total_tokens(), kHeads, kKvHeads, head_dim)),
        device(host),
        scale(dualkv::default_softmax_scale(head_dim)) {}

  dualkv::ForwardParams forward() const { return device_forward_params(device, host, scale); }
  dualkv::BackwardParams backward() const { return device_backward_params(device, host, scale, false); }

  dualkv::Layout layout;
  HostTensors host;
  DeviceTensors device;
  float scale;
};

// Device scratch far larger than any plan of kBatch needs.
constexpr size_t kGenerousWorkspace = size_t{1} << 24;

template <typename Params>
Params with_workspace(Params params, const DeviceBytes& workspace, size_t bytes) {
  params.options.workspace = workspace.data();
  params.options.workspace_bytes = bytes;
  return params;
}

// Both workspace queries, the forward and the backward reject the parameters with an Error
// naming `argument`; each call is checked on its own so that one early check cannot hide a
// missing one.
void expect_every_entry_point_rejects(const dualkv::Layout& layout, const dualkv::ForwardParams& forward,
                                      const dualkv::BackwardParams& backward, const std::string& argument) {
  EXPECT_TRUE(error_naming(argument, [&] { dualkv::forward_workspace_bytes(layout, forward); }));
  EXPECT_TRUE(error_naming(argument, [&] { dualkv::backward_workspace_bytes(layout, backward); }));
  EXPECT_TRUE(error_naming(argument, [&] { dualkv::forward(layout, forward); }));
  EXPECT_TRUE(error_naming(argument, [&] { dualkv::backward(layout, backward); }));
}

TEST(CudaErrors, Float64AccumulationIsCpuOnly) {
  const Problem problem(64);
  const DeviceBytes workspace(kGenerousWorkspace);
  dualkv::ForwardParams forward = with_workspace(problem.forward(), workspace, workspace.bytes());
  dualkv::BackwardParams backward = with_workspace(problem.backward(), workspace, workspace.bytes());
  forward.options.accumulation = dualkv::Accumulation::kFloat64;
  backward.options.accumulation = dualkv::Accumulation::kFloat64;
  expect_every_entry_point_rejects(problem.layout, forward, backward, "options.accumulation");
}

// fp32 tensors are valid (the CPU path runs them) but the CUDA path compiles fp16/bf16 kernels only.
TEST(CudaErrors, Float32NotCompiled) {
  const Problem problem(64, DType::kFloat32);
  const DeviceBytes workspace(kGenerousWorkspace);
  expect_every_entry_point_rejects(problem.layout, with_workspace(problem.forward(), workspace, workspace.bytes()),
                                   with_workspace(problem.backward(), workspace, workspace.bytes()), "q.dtype");
}

// 96 is a valid head dim (the CPU path runs it) that the CUDA path does not compile.
TEST(CudaErrors, HeadDimNotCompiled) {
  const Problem problem(96);
  const DeviceBytes workspace(kGenerousWorkspace);
  expect_every_entry_point_rejects(problem.layout, with_workspace(problem.forward(), workspace, workspace.bytes()),
                                   with_workspace(problem.backward(), workspace, workspace.bytes()), "q.head_dim");
}

// The forward needs no workspace (its plan is kept with the layout); the backward's holds D and
// the atomic mode's dQ accumulator.
TEST(CudaErrors, WorkspaceTooSmall) {
  const Problem problem(64);
  EXPECT_EQ(dualkv::forward_workspace_bytes(problem.layout, problem.forward()), 0u);
  EXPECT_NO_THROW(dualkv::forward(problem.layout, problem.forward()));
  const size_t backward_bytes = dualkv::backward_workspace_bytes(problem.layout, problem.backward());
  ASSERT_GT(backward_bytes, 0u);
  const DeviceBytes backward_workspace(backward_bytes);
  const dualkv::BackwardParams backward = with_workspace(problem.backward(), backward_workspace, backward_bytes - 1);
  EXPECT_TRUE(error_naming("options.workspace_bytes", [&] { dualkv::backward(problem.layout, backward); }));
  EXPECT_TRUE(error_naming("options.workspace_bytes", [&] { dualkv::backward(problem.layout, problem.backward()); }));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A shared-memory cap below what any compiled kernel needs is an Error naming the option; a cap
// above the device's own limit is lowered to it (the call runs).
TEST(CudaErrors, SharedMemoryLimitNoKernelFits) {
  const Problem problem(128);
  const DeviceBytes workspace(kGenerousWorkspace);
  dualkv::ForwardParams forward = with_workspace(problem.forward(), workspace, workspace.bytes());
  dualkv::BackwardParams backward = with_workspace(problem.backward(), workspace, workspace.bytes());
  forward.options.max_shared_memory_per_block = 32 * 1024;
  backward.options.max_shared_memory_per_block = 32 * 1024;
  const std::string option = "options.max_shared_memory_per_block";
  EXPECT_TRUE(error_naming(option, [&] { dualkv::forward(problem.layout, forward); }));
  EXPECT_TRUE(error_naming(option, [&] { dualkv::backward_workspace_bytes(problem.layout, backward); }));
  EXPECT_TRUE(error_naming(option, [&] { dualkv::backward(problem.layout, backward); }));

  forward.options.max_shared_memory_per_block = ~size_t{0};
  backward.options.max_shared_memory_per_block = ~size_t{0};
  EXPECT_NO_THROW(dualkv::forward(problem.layout, forward));
  EXPECT_NO_THROW(dualkv::backward(problem.layout, backward));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Host memory of `bytes` bytes, aligned like malloc (16 bytes on x86-64), so that only its
// placement is wrong.
std::vector<std::max_align_t> host_memory(size_t bytes) {
  return std::vector<std::max_align_t>(bytes / sizeof(std::max_align_t) + 1);
}

template <typename Params>
void point_at(Params& params, const std::string& name, void* host) {
  auto* raw = static_cast<unsigned char*>(host);
  if constexpr (std::is_same_v<Params, dualkv::ForwardParams>) {
    if (name == "out") params.out.data = raw;
    if (name == "lse") params.lse.data = reinterpret_cast<float*>(raw);
  } else {
    if (name == "dout") params.dout.data = raw;
    if (name == "out") params.out.data = raw;
    if (name == "lse") params.lse.data = reinterpret_cast<const float*>(raw);
    if (name == "dq") params.dq.data = raw;
    if (name == "dk") params.dk.data = raw;
    if (name == "dv") params.dv.data = raw;
  }
  if (name == "q") params.q.data = raw;
  if (name == "k") params.k.data = raw;
  if (name == "v") params.v.data = raw;
}

TEST(CudaErrors, HostPointerDeclaredCuda) {
  const Problem problem(64);
  const DeviceBytes workspace(kGenerousWorkspace);
  std::vector<std::max_align_t> host =
      host_memory(problem.host.q.storage->bytes().size() + problem.host.lse.values.size() * sizeof(float));
  for (const std::string name : {"q", "k", "v", "out", "lse"}) {
    dualkv::ForwardParams forward = with_workspace(problem.forward(), workspace, workspace.bytes());
    point_at(forward, name, host.data());
    EXPECT_TRUE(error_naming(name + ".device", [&] { dualkv::forward(problem.layout, forward); })) << name;
  }
  for (const std::string name : {"dout", "q", "k", "v", "out", "lse", "dq", "dk", "dv"}) {
    dualkv::BackwardParams backward = with_workspace(problem.backward(), workspace, workspace.bytes());
    point_at(backward, name, host.data());
    EXPECT_TRUE(error_naming(name + ".device", [&] { dualkv::backward(problem.layout, backward); })) << name;
  }
}

}  // namespace
}  // namespace dualkv_test
