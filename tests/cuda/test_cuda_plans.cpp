// Work plans kept with the layout (include/dualkv/layout.h) on the device: each direction's plan
// is built and uploaded by a layout's first call and reused by later calls and by copies of the
// layout, freed with the layout's last copy, even while its calls still run; a graph captures a
// call whose plans are cached and keeps those plans past the layout, and a call that would have to
// upload one is an Error.
//
// The plans are the library's only stream-ordered allocations (cudaMallocAsync; the suite's own
// memory comes from cudaMalloc), so the device's default memory pool shows each one from outside.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "attention_problem.h"

namespace dualkv_test {
namespace {

const BatchSpec kBatch = {{130, {70, 1, 129}}, {17, {64}}};
const BatchSpec kOtherBatch = {{200, {100, 30}}, {1, {80}}};  // as many tokens, other segments
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 64;

// Random inputs on the device, one layout, and the workspace its largest call (the atomic-dQ
// backward) needs.
struct Problem {
  Problem()
      : layout(make_layout(kBatch)),
        host(make_host_tensors(Placement::kContiguous, dualkv::DType::kFloat16, layout.total_tokens(), kHeads, kKvHeads,
                               kHeadDim)),
        device(fill(host)),
        scale(dualkv::default_softmax_scale(kHeadDim)),
        workspace(dualkv::backward_workspace_bytes(layout, device_backward_params(device, host, scale, false))) {}

  static HostTensors& fill(HostTensors& host) {
    std::mt19937_64 rng = rng_for_current_test();
    for (StridedTensor* view : {&host.q, &host.k, &host.v, &host.dout}) fill_uniform(*view, rng);
    return host;
  }

  dualkv::ForwardParams forward() const { return with_workspace(device_forward_params(device, host, scale)); }
  dualkv::BackwardParams backward(bool deterministic) const {
    return with_workspace(device_backward_params(device, host, scale, deterministic));
  }

  template <typename Params>
  Params with_workspace(Params params) const {
    params.options.workspace = workspace.data();
    params.options.workspace_bytes = workspace.bytes();
    return params;
  }

  // Every output's bytes, padding included, after the device has finished.
  std::vector<unsigned char> outputs() {
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<unsigned char> bytes;
    for (const StridedTensor* view : {&host.out, &host.dq, &host.dk, &host.dv}) {
      device.download(*view);
      bytes.insert(bytes.end(), view->storage->bytes().begin(), view->storage->bytes().end());
    }
    device.download_lse();
    const auto* lse = reinterpret_cast<const unsigned char*>(host.lse.values.data());
    bytes.insert(bytes.end(), lse, lse + host.lse.values.size() * sizeof(float));
    return bytes;
  }

  // Every output (and its host copy) poisoned.
  void poison_outputs() {
    for (const StridedTensor* view : {&host.out, &host.dq, &host.dk, &host.dv}) {
      view->storage->poison();
      device.upload(*view);
    }
    host.lse.poison();
    device.upload_lse();
  }

  // Forward, then backward, on `stream`; returns without waiting.
  void run(const dualkv::Layout& with, cudaStream_t stream, bool deterministic = true) const {
    dualkv::ForwardParams forward_params = forward();
    forward_params.options.stream = stream;
    dualkv::forward(with, forward_params);
    dualkv::BackwardParams backward_params = backward(deterministic);
    backward_params.options.stream = stream;
    dualkv::backward(with, backward_params);
  }

  dualkv::Layout layout;
  HostTensors host;
  DeviceTensors device;
  float scale;
  DeviceBytes workspace;
};

// Bytes of the device's default memory pool in use; skips the test where there is none.
class PoolUse {
 public:
  PoolUse() {
    int device = 0, pools = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device), "cudaDeviceGetAttribute");
    if (pools != 0) check_cuda(cudaDeviceGetDefaultMemPool(&pool_, device), "cudaDeviceGetDefaultMemPool");
  }
  bool available() const { return pool_ != nullptr; }
  uint64_t bytes() const {
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    uint64_t used = 0;
    check_cuda(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used), "cudaMemPoolGetAttribute");
    return used;
  }

 private:
  cudaMemPool_t pool_ = nullptr;
};

TEST(CudaPlans, ALayoutUploadsEachPlanOnce) {
  const PoolUse pool;
  if (!pool.available()) GTEST_SKIP() << "no memory pools on this device: plans use cudaMalloc";
  const uint64_t before = pool.bytes();
  {
    Problem problem;
    const Stream stream;
    dualkv::forward(problem.layout, problem.forward());
    const uint64_t forward_plan = pool.bytes();
    EXPECT_GT(forward_plan, before) << "the first forward uploads its plan";
    dualkv::forward(problem.layout, problem.forward());
    const dualkv::Layout copy = problem.layout;
    dualkv::ForwardParams on_stream = problem.forward();
    on_stream.options.stream = stream.get();
    dualkv::forward(copy, on_stream);
    EXPECT_EQ(pool.bytes(), forward_plan) << "later forwards, a copy of the layout, another stream: no upload";

    dualkv::backward(problem.layout, problem.backward(false));
    const uint64_t backward_plan = pool.bytes();
    EXPECT_GT(backward_plan, forward_plan) << "the first backward uploads its plan";
    dualkv::backward(problem.layout, problem.backward(false));
    EXPECT_EQ(pool.bytes(), backward_plan);
    dualkv::backward(problem.layout, problem.backward(true));
    EXPECT_GT(pool.bytes(), backward_plan) << "the deterministic backward also plans query tiles";
  }
  EXPECT_EQ(pool.bytes(), before) << "the layout's last copy frees its plans";
}

// A call with a cached plan gives the same bits as the call that built it. A layout may go out of
// scope right after its calls are enqueued: its plans are freed only once they ran
// (compute-sanitizer memcheck reports a read of freed plan memory).
TEST(CudaPlans, CachedAndShortLivedPlansGiveTheSameBits) {
  Problem problem;
  const Stream stream;
  problem.run(problem.layout, stream.get());
  const std::vector<unsigned char> expected = problem.outputs();
  problem.run(problem.layout, stream.get());
  EXPECT_TRUE(expected == problem.outputs()) << "a cached plan";
  for (int round = 0; round < 3; ++round) {
    const dualkv::Layout short_lived = make_layout(kBatch);
    problem.run(short_lived, stream.get());
  }
  EXPECT_TRUE(expected == problem.outputs()) << "layouts destroyed while their calls ran";
}

// The graph of what `work` enqueues on `stream`, captured in the default (global) mode.
template <typename Work>
cudaGraph_t capture(cudaStream_t stream, Work&& work) {
  cudaGraph_t graph = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  work();
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  return graph;
}

// Runs `graph` once on `stream` and destroys it.
void launch_once(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check_cuda(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");
}

TEST(CudaPlans, AGraphCapturesCallsWithCachedPlans) {
  Problem problem;
  const Stream stream;
  problem.run(problem.layout, stream.get());
  const std::vector<unsigned char> expected = problem.outputs();
  problem.poison_outputs();
  const std::vector<unsigned char> poisoned = problem.outputs();
  const cudaGraph_t graph = capture(stream.get(), [&] { problem.run(problem.layout, stream.get()); });
  EXPECT_TRUE(poisoned == problem.outputs()) << "capture itself runs nothing";
  launch_once(graph, stream.get());
  EXPECT_TRUE(expected == problem.outputs());
}

// A graph replays its captured calls' plans after their layout is gone and other layouts have
// allocated and freed plans since: plans a captured call used are never freed.
TEST(CudaPlans, AGraphOutlivesTheLayoutItCaptured) {
  Problem problem;
  const Stream stream;
  problem.run(problem.layout, stream.get());
  const std::vector<unsigned char> expected = problem.outputs();
  const PoolUse pool;
  cudaGraph_t graph = nullptr;
  uint64_t with_captured_plans = 0;
  {
    const dualkv::Layout captured = make_layout(kBatch);
    problem.run(captured, stream.get());
    graph = capture(stream.get(), [&] { problem.run(captured, stream.get()); });
    if (pool.available()) with_captured_plans = pool.bytes();
  }
  if (pool.available()) EXPECT_EQ(pool.bytes(), with_captured_plans) << "the captured plans stay";
  for (int round = 0; round < 3; ++round) {
    const dualkv::Layout other = make_layout(kOtherBatch);
    problem.run(other, stream.get());
    check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
  }
  problem.poison_outputs();
  launch_once(graph, stream.get());
  EXPECT_TRUE(expected == problem.outputs());
}

// Destroying a layout frees its plans on a stream of the library's own; while another stream
// captures a graph in the default (global) mode, that must not invalidate the capture.
TEST(CudaPlans, ALayoutDestroyedDuringACaptureLeavesTheCaptureValid) {
  Problem problem;
  const Stream stream;
  problem.run(problem.layout, stream.get());
  const std::vector<unsigned char> expected = problem.outputs();
  std::optional<dualkv::Layout> other(make_layout(kOtherBatch));
  problem.run(*other, stream.get());
  check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
  const cudaGraph_t graph = capture(stream.get(), [&] {
    problem.run(problem.layout, stream.get());
    other.reset();
  });
  problem.poison_outputs();
  launch_once(graph, stream.get());
  EXPECT_TRUE(expected == problem.outputs());
}

TEST(CudaPlans, CapturingACallThatWouldUploadIsAnError) {
  Problem problem;
  const Stream stream;
  dualkv::ForwardParams params = problem.forward();
  params.options.stream = stream.get();
  const cudaGraph_t graph = capture(stream.get(), [&] {
    try {
      dualkv::forward(problem.layout, params);
      ADD_FAILURE() << "the forward's plan is not cached yet";
    } catch (const dualkv::Error& error) {
      EXPECT_EQ(error.argument(), "options.stream") << error.what();
    }
  });
  check_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");
  EXPECT_NO_THROW(dualkv::forward(problem.layout, params)) << "outside capture the call builds the plan";
  check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
}

}  // namespace
}  // namespace dualkv_test
