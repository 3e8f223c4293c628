#include "config_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "memory_high_water.h"
#include "random_fill.h"

namespace dualkv::bench {
namespace {

constexpr Device kCuda{DeviceKind::kCuda, 0};
// A second input set is allocated only if it leaves this share of the free memory unused.
constexpr double kRotationHeadroom = 1.25;
constexpr int kMaxInputSets = 2;

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

template <typename View>
View token_head_view(void* data, DType dtype, int64_t tokens, int64_t heads, int64_t head_dim) {
  View view;
  view.data = data;
  view.dtype = dtype;
  view.device = kCuda;
  view.tokens = tokens;
  view.heads = heads;
  view.head_dim = head_dim;
  view.token_stride = heads * head_dim;
  view.head_stride = head_dim;
  return view;
}

// Every tensor of one forward + backward, contiguous, inputs random; the parameters of both
// passes carry the run's shared-memory cap and kernel family, the backward's also its mode.
class TensorSet {
 public:
  TensorSet(const BenchConfig& config, DType dtype, int64_t tokens, uint64_t seed, const RunOptions& options)
      : config_(config),
        dtype_(dtype),
        tokens_(tokens),
        options_(options),
        q_(kCuda, dtype, query_elements()),
        k_(kCuda, dtype, kv_elements()),
        v_(kCuda, dtype, kv_elements()),
        out_(kCuda, dtype, query_elements()),
        dout_(kCuda, dtype, query_elements()),
        dq_(kCuda, dtype, query_elements()),
        dk_(kCuda, dtype, kv_elements()),
        dv_(kCuda, dtype, kv_elements()),
        lse_(kCuda, DType::kFloat32, static_cast<size_t>(config.heads * tokens)) {
    uint64_t stream = seed * 16;
    for (tools::DeviceBuffer* input : {&q_, &k_, &v_, &dout_}) {
      fill_uniform(input->data(), dtype, input->elements(), ++stream);
    }
  }

  ForwardParams forward_params() const {
    ForwardParams params;
    params.q = query_view<InputTensor>(q_);
    params.k = kv_view<InputTensor>(k_);
    params.v = kv_view<InputTensor>(v_);
    params.out = query_view<OutputTensor>(out_);
    params.lse = lse_output();
    params.softmax_scale = default_softmax_scale(config_.head_dim);
    params.options.max_shared_memory_per_block = options_.max_shared_memory_per_block;
    params.options.kernel_family = options_.kernel_family;
    return params;
  }

  BackwardParams backward_params() const {
    BackwardParams params;
    params.dout = query_view<InputTensor>(dout_);
    params.q = query_view<InputTensor>(q_);
    params.k = kv_view<InputTensor>(k_);
    params.v = kv_view<InputTensor>(v_);
    params.out = query_view<InputTensor>(out_);
    const LseOutput lse = lse_output();
    params.lse = LseInput{lse.data, lse.device, lse.heads, lse.tokens, lse.head_stride};
    params.dq = query_view<OutputTensor>(dq_);
    params.dk = kv_view<OutputTensor>(dk_);
    params.dv = kv_view<OutputTensor>(dv_);
    params.softmax_scale = default_softmax_scale(config_.head_dim);
    params.deterministic = options_.deterministic;
    params.options.max_shared_memory_per_block = options_.max_shared_memory_per_block;
    params.options.kernel_family = options_.kernel_family;
    return params;
  }

 private:
  size_t query_elements() const { return static_cast<size_t>(tokens_ * config_.heads * config_.head_dim); }
  size_t kv_elements() const { return static_cast<size_t>(tokens_ * config_.kv_heads * config_.head_dim); }

  template <typename View>
  View query_view(const tools::DeviceBuffer& buffer) const {
    return token_head_view<View>(const_cast<void*>(buffer.data()), dtype_, tokens_, config_.heads, config_.head_dim);
  }
  template <typename View>
  View kv_view(const tools::DeviceBuffer& buffer) const {
    return token_head_view<View>(const_cast<void*>(buffer.data()), dtype_, tokens_, config_.kv_heads, config_.head_dim);
  }
  LseOutput lse_output() const {
    LseOutput lse;
    lse.data = static_cast<float*>(const_cast<void*>(lse_.data()));
    lse.device = kCuda;
    lse.heads = config_.heads;
    lse.tokens = tokens_;
    lse.head_stride = tokens_;
    return lse;
  }

  BenchConfig config_;
  DType dtype_;
  int64_t tokens_;
  RunOptions options_;
  tools::DeviceBuffer q_, k_, v_, out_, dout_, dq_, dk_, dv_, lse_;
};

size_t tensor_bytes(const BenchConfig& config, int64_t tokens) {
  const auto element = static_cast<size_t>(2);  // fp16 / bf16
  const auto per_token = static_cast<size_t>(4 * (config.heads + config.kv_heads) * config.head_dim);
  return element * per_token * static_cast<size_t>(tokens);
}

size_t free_device_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return free_bytes;
}

struct Pass {
  const Layout& layout;
  const tools::Workspace& workspace;

  void forward(const TensorSet& set) const {
    ForwardParams params = set.forward_params();
    params.options.workspace = workspace.data;
    params.options.workspace_bytes = workspace.bytes;
    dualkv::forward(layout, params);
  }
  void backward(const TensorSet& set) const {
    BackwardParams params = set.backward_params();
    params.options.workspace = workspace.data;
    params.options.workspace_bytes = workspace.bytes;
    dualkv::backward(layout, params);
  }
};

// Loads every kernel this configuration uses (modules load lazily at first launch, and their
// memory must not count as the measured region's) on a small batch of the same heads and dtype.
void load_kernels(const BenchConfig& config, DType dtype, const RunOptions& options) {
  BenchConfig small = config;
  small.prompt = 256;
  small.responses = 2;
  small.response = 64;
  small.response_lengths.clear();
  const Layout layout = small.layout();
  const TensorSet set(small, dtype, layout.total_tokens(), 0, options);
  const tools::Workspace workspace(kCuda, std::max(forward_workspace_bytes(layout, set.forward_params()),
                                                   backward_workspace_bytes(layout, set.backward_params())));
  const Pass pass{layout, workspace};
  pass.forward(set);
  pass.backward(set);
  check_cuda(cudaDeviceSynchronize(), "kernel warm-up");
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

}  // namespace

KernelFamily parse_kernel_family(const std::string& name) {
  for (const KernelFamily family : {KernelFamily::kAuto, KernelFamily::kPortable, KernelFamily::kHopper}) {
    if (name == kernel_family_name(family)) return family;
  }
  throw std::invalid_argument("--kernel-family must be auto, portable or hopper (got '" + name + "')");
}

const char* kernel_family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::kAuto:
      return "auto";
    case KernelFamily::kPortable:
      return "portable";
    case KernelFamily::kHopper:
      return "hopper";
  }
  return "unknown";
}

BenchResult run_config(const BenchConfig& config, DType dtype, const RunOptions& options) {
  BenchResult result;
  result.config = config;
  result.dtype = dtype;
  const Layout layout = config.layout();
  const int64_t tokens = layout.total_tokens();
  result.tensor_bytes = tensor_bytes(config, tokens);
  load_kernels(config, dtype, options);

  // Peak memory of one forward + backward with one input set and one shared workspace (the two
  // passes run one after the other, so a caller reuses the same scratch).
  MemoryHighWater memory;
  std::vector<std::unique_ptr<TensorSet>> sets;
  sets.push_back(std::make_unique<TensorSet>(config, dtype, tokens, 1, options));
  memory.sample();
  const tools::Workspace workspace(kCuda, std::max(forward_workspace_bytes(layout, sets[0]->forward_params()),
                                                   backward_workspace_bytes(layout, sets[0]->backward_params())));
  memory.sample();
  const Pass pass{layout, workspace};
  pass.forward(*sets[0]);
  check_cuda(cudaDeviceSynchronize(), "forward");
  memory.sample();
  pass.backward(*sets[0]);
  check_cuda(cudaDeviceSynchronize(), "backward");
  memory.sample();
  result.peak_bytes = memory.peak_bytes();

  // More input sets, so that timed runs do not re-read inputs another run left in L2.
  const size_t set_bytes = result.tensor_bytes + static_cast<size_t>(config.heads * tokens) * sizeof(float);
  while (static_cast<int>(sets.size()) < kMaxInputSets &&
         static_cast<double>(free_device_bytes()) > kRotationHeadroom * static_cast<double>(set_bytes)) {
    sets.push_back(std::make_unique<TensorSet>(config, dtype, tokens, sets.size() + 1, options));
  }
  result.input_sets = static_cast<int>(sets.size());

  for (int w = 0; w < options.warmups; ++w) {
    for (const auto& set : sets) {
      pass.forward(*set);
      pass.backward(*set);
    }
  }
  tools::RegionTimer timer(kCuda);
  std::vector<double> forward_ms, backward_ms;
  for (int r = 0; r < options.repeats; ++r) {
    const TensorSet& set = *sets[r % sets.size()];
    timer.start();
    pass.forward(set);
    forward_ms.push_back(timer.stop_ms());
    timer.start();
    pass.backward(set);
    backward_ms.push_back(timer.stop_ms());
  }
  std::vector<double> forward_alone_ms;
  for (int r = 0; r < options.repeats; ++r) {
    timer.start();
    pass.forward(*sets[r % sets.size()]);
    forward_alone_ms.push_back(timer.stop_ms());
  }
  result.repeats = options.repeats;
  result.forward_ms = median(forward_ms);
  result.backward_ms = median(backward_ms);
  result.forward_alone_ms = median(forward_alone_ms);
  result.forward_tflops = forward_flops(config) / (result.forward_ms * 1e9);
  result.backward_tflops = backward_flops(config) / (result.backward_ms * 1e9);
  result.forward_alone_tflops = forward_flops(config) / (result.forward_alone_ms * 1e9);
  return result;
}

}  // namespace dualkv::bench
