#include "cuda/common/device_plan.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/common/cuda_check.h"
#include "dualkv/errors.h"

namespace dualkv::detail {
namespace {

// The stream plans of `device` (the current device) are freed on, after the streams that used
// them. Created once and never destroyed: destroying it at exit could come after the CUDA
// runtime's own teardown.
cudaStream_t release_stream(int device) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  const std::lock_guard<std::mutex> lock(mutex);
  if (streams.size() <= static_cast<size_t>(device)) streams.resize(device + 1, nullptr);
  if (streams[device] == nullptr) {
    check_cuda(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags (work plan release stream)");
  }
  return streams[device];
}

bool has_memory_pools(int device) {
  int supported = 0;
  check_cuda(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
             "cudaDeviceGetAttribute (memory pools)");
  return supported != 0;
}

// A plan image in device memory, uploaded on the stream of the call that built it. It is freed
// after the work of every stream that used it without blocking the host: a stream of its own
// waits for each user stream's last recorded use, then frees it in stream order. A device without
// memory pools (cudaMallocAsync) frees it with cudaFree, which waits for the whole device.
class UploadedPlan final : public DevicePlanBuffer {
 public:
  UploadedPlan(int device, const std::vector<unsigned char>& bytes, cudaStream_t stream)
      : device_(device), release_(has_memory_pools(device) ? release_stream(device) : nullptr) {
    check_cuda(release_ != nullptr ? cudaMallocAsync(&data_, bytes.size(), stream) : cudaMalloc(&data_, bytes.size()),
               "work plan allocation");
    try {
      // From pageable memory: staged before the call returns, so `bytes` may go right after.
      check_cuda(cudaMemcpyAsync(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync (work plan upload)");
      check_cuda(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming), "cudaEventCreateWithFlags (work plan)");
      check_cuda(cudaEventRecord(uploaded_, stream), "cudaEventRecord (work plan upload)");
    } catch (...) {
      release();
      throw;
    }
  }

  ~UploadedPlan() override { release(); }

  const void* data() const override { return data_; }

  // Waits on every use, not only a stream's first: a destroyed stream's handle may come back as a
  // new stream's, and the wait on a completed upload costs the device nothing.
  void begin_use(void* stream) override {
    const auto user = static_cast<cudaStream_t>(stream);
    const std::lock_guard<std::mutex> lock(mutex_);
    check_cuda(cudaStreamWaitEvent(user, uploaded_, 0), "cudaStreamWaitEvent (work plan upload)");
    for (const Use& use : uses_) {
      if (use.stream == user) return;
    }
    cudaEvent_t last_use = nullptr;
    check_cuda(cudaEventCreateWithFlags(&last_use, cudaEventDisableTiming), "cudaEventCreateWithFlags (work plan)");
    uses_.push_back({user, last_use});
  }

  // A CUDA graph that captured a call with this plan reads it at every replay, and nothing tells
  // the library when that graph is gone: from the first captured call on, the allocation is
  // never freed, so no replay can read memory given to something else.
  void keep_for_graph_replays() noexcept { kept_for_graph_replays_ = true; }

  // Failures are dropped: they come from a device already in an error state, where the
  // allocation's release no longer matters.
  void end_use(void* stream) noexcept override {
    const auto user = static_cast<cudaStream_t>(stream);
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const Use& use : uses_) {
      if (use.stream == user) cudaEventRecord(use.last_use, user);
    }
  }

 private:
  struct Use {
    cudaStream_t stream;
    cudaEvent_t last_use;  // recorded after each call's launches on `stream`
  };

  // Destructor-safe (no throw): errors here mean the context is gone, and the memory with it.
  // A layout may die while a stream of this thread captures a graph: in the default (global)
  // capture mode these calls would invalidate that capture, though none of them touches its work,
  // so they run in the relaxed mode.
  void release() noexcept {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const bool exchanged = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    int previous = 0;
    const bool switched =
        cudaGetDevice(&previous) == cudaSuccess && previous != device_ && cudaSetDevice(device_) == cudaSuccess;
    if (kept_for_graph_replays_) data_ = nullptr;
    if (release_ != nullptr) {
      if (uploaded_ != nullptr) cudaStreamWaitEvent(release_, uploaded_, 0);
      for (const Use& use : uses_) cudaStreamWaitEvent(release_, use.last_use, 0);
      if (data_ != nullptr) cudaFreeAsync(data_, release_);
    } else if (data_ != nullptr) {
      cudaFree(data_);
    }
    for (const Use& use : uses_) cudaEventDestroy(use.last_use);
    if (uploaded_ != nullptr) cudaEventDestroy(uploaded_);
    if (switched) cudaSetDevice(previous);
    if (exchanged) cudaThreadExchangeStreamCaptureMode(&mode);
  }

  const int device_;
  const cudaStream_t release_;  // nullptr: the device has no memory pools
  void* data_ = nullptr;
  std::atomic<bool> kept_for_graph_replays_{false};
  cudaEvent_t uploaded_ = nullptr;
  std::mutex mutex_;
  std::vector<Use> uses_;
};

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

// The plan of `key` for a call on `stream`; `captured`: the stream is capturing a graph.
const CachedPlan& cached_plan(const Layout& layout, const PlanKey& key, cudaStream_t stream, bool captured,
                              const std::function<PlanImage()>& build) {
  PlanCache& cache = plan_cache(layout);
  if (captured) {
    if (const CachedPlan* plan = cache.find(key)) {
      static_cast<UploadedPlan*>(plan->buffer.get())->keep_for_graph_replays();  // the cache holds only these
      return *plan;
    }
    throw Error("options.stream",
                "is capturing a CUDA graph, but this layout's work plan for this device and kernel shape is not "
                "built yet, and its upload from host memory cannot be captured: run one call with this layout "
                "(same device, head_dim and direction) before capturing");
  }
  return cache.find_or_make(key, [&] {
    const PlanImage image = build();
    return CachedPlan{std::make_unique<UploadedPlan>(key.device, image.bytes(), stream), image.regions()};
  });
}

}  // namespace

PlanUse::PlanUse(DevicePlanBuffer* buffer, void* stream) : buffer_(buffer), stream_(stream) {
  if (buffer_ != nullptr) buffer_->begin_use(stream_);
}

PlanUse::~PlanUse() {
  if (buffer_ != nullptr) buffer_->end_use(stream_);
}

DeviceQueryPlan device_query_plan(const Layout& layout, int block_m, int device, const ExecutionOptions& options) {
  const auto stream = static_cast<cudaStream_t>(options.stream);
  const bool captured = capturing(stream);
  const PlanKey key{PlanKey::Kind::kQueryTiles, device, {block_m, 0, 0}};
  const CachedPlan& plan = cached_plan(layout, key, stream, captured, [&] {
    const QueryPlan query_plan = build_query_plan(layout, block_m);
    PlanImage image;
    image.append(query_plan.tiles);
    image.append(query_plan.ranges);
    return image;
  });
  return {plan.region<QueryTile>(0), plan.region<KeyRange>(1), plan.count(0),
          PlanUse(captured ? nullptr : plan.buffer.get(), options.stream)};
}

DeviceBackwardPlan device_backward_plan(const Layout& layout, int key_block, int query_block, int dq_query_block,
                                        int device, const ExecutionOptions& options) {
  const auto stream = static_cast<cudaStream_t>(options.stream);
  const bool captured = capturing(stream);
  const PlanKey key{PlanKey::Kind::kBackwardTiles, device, {key_block, query_block, dq_query_block}};
  const CachedPlan& plan = cached_plan(layout, key, stream, captured, [&] {
    return backward_plan_image(layout, key_block, query_block, dq_query_block);
  });
  return {plan.region<int32_t>(kCuSeqlensRegion),
          plan.region<int32_t>(kCuRunsRegion),
          plan.count(kCuRunsRegion) - 1,
          plan.region<QueryRun>(kRunTableRegion),
          plan.region<TileWork>(kKeyTilesRegion),
          plan.count(kKeyTilesRegion),
          plan.region<QueryTile>(kQueryTilesRegion),
          plan.region<KeyRange>(kQueryKeyRangesRegion),
          plan.count(kQueryTilesRegion),
          PlanUse(captured ? nullptr : plan.buffer.get(), options.stream)};
}

}  // namespace dualkv::detail
