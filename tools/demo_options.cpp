#include "demo_options.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "common/device_buffer.h"

namespace dualkv::tools {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kDefaultSeed = 1;
constexpr size_t kUsageFlagWidth = 18;  // the column --help prints each flag's text at

// The defaults that depend on where the demo runs: exact fp32 and one timed run on the CPU, the
// dtype of training and a median over warm runs on CUDA.
struct DeviceDefaults {
  const char* dtype;
  int64_t warmups;
  int64_t repeats;
};
constexpr DeviceDefaults kCpuDefaults{"fp32", 0, 1};
constexpr DeviceDefaults kCudaDefaults{"bf16", 3, 10};

DType parse_dtype(const std::string& name) {
  if (name == "fp32") return DType::kFloat32;
  if (name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  throw std::invalid_argument("--dtype must be fp32, fp16 or bf16, got '" + name + "'");
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return {DeviceKind::kCpu, 0};
  if (name == "cuda") return {DeviceKind::kCuda, 0};
  if (name == "auto") return cuda_device_available() ? Device{DeviceKind::kCuda, 0} : Device{DeviceKind::kCpu, 0};
  throw std::invalid_argument("--device must be auto, cpu or cuda, got '" + name + "'");
}

// The demo also runs the N-copy batch, N (P_g + R_i) tokens per group, which is larger than the
// packed one; both layouts hold int32 offsets. Counted with every response at its longest, group
// by group, stopping as soon as the range is passed (each group adds at least 2 tokens).
void check_token_range(const BatchShape& s) {
  int64_t tokens = 0;
  for (int64_t g = 0; g < s.groups; ++g) {
    tokens += s.responses * (prompt_length(s, g) + s.response);
    if (tokens > kMaxTokens) {
      throw std::invalid_argument("--groups, --n, --p, --r: the N-copy batch would hold more than " +
                                  std::to_string(kMaxTokens) + " tokens (the int32 range of a layout)");
    }
  }
}

}  // namespace

DemoOptions parse_demo_options(int argc, char** argv) {
  Flags flags(argc, argv);
  DemoOptions options;
  options.help = flags.help();
  BatchShape& shape = options.shape;
  // Each count fits int32, so the products below fit int64.
  shape.groups = flags.get_int("groups", shape.groups, 1, kMaxTokens);
  shape.responses = flags.get_int("n", shape.responses, 1, kMaxTokens);
  shape.prompt = flags.get_int("p", shape.prompt, 1, kMaxTokens);
  shape.response = flags.get_int("r", shape.response, 1, kMaxTokens);
  shape.ragged = flags.get_int("ragged", shape.ragged ? 1 : 0, 0, 1) == 1;
  shape.heads = flags.get_int("heads", shape.heads, 1, kMaxInt);
  shape.kv_heads = flags.get_int("kv-heads", shape.kv_heads, 1, kMaxInt);
  shape.head_dim = flags.get_int("head-dim", shape.head_dim, 1, kMaxHeadDim);
  shape.seed = static_cast<uint64_t>(flags.get_int("seed", kDefaultSeed));
  options.device = parse_device(flags.get_string("device", "auto"));
  const DeviceDefaults& defaults = options.device.kind == DeviceKind::kCuda ? kCudaDefaults : kCpuDefaults;
  shape.dtype = parse_dtype(flags.get_string("dtype", defaults.dtype));
  options.timing.warmups = static_cast<int>(flags.get_int("warmups", defaults.warmups, 0, kMaxInt));
  options.timing.repeats = static_cast<int>(flags.get_int("repeats", defaults.repeats, 1, kMaxInt));
  options.timing.cpu_threads = static_cast<int>(flags.get_int("cpu-threads", RunSettings{}.cpu_threads, 0, kMaxInt));
  if (options.help) return options;
  flags.reject_unknown();
  if (shape.heads % shape.kv_heads != 0) {
    throw std::invalid_argument("--heads (" + std::to_string(shape.heads) + ") must be a multiple of --kv-heads (" +
                                std::to_string(shape.kv_heads) + ")");
  }
  check_token_range(shape);
  return options;
}

std::string demo_usage() {
  const BatchShape d;
  const auto n = [](int64_t value) { return std::to_string(value); };
  const auto per_device = [&](int64_t cpu, int64_t cuda) { return n(cpu) + " on the CPU, " + n(cuda) + " on CUDA"; };
  const std::vector<std::pair<const char*, std::string>> flags = {
      {"--groups G", "prompt groups; group g's prompt has P - g*P/(2G) tokens (default " + n(d.groups) + ")"},
      {"--n N", "responses per group (default " + n(d.responses) + ")"},
      {"--p P", "prompt length of group 0 (default " + n(d.prompt) + ")"},
      {"--r R", "longest response (default " + n(d.response) + ")"},
      {"--ragged 0|1", "1: response lengths uniform in [R/2, R]; 0: all R (default " + n(d.ragged ? 1 : 0) + ")"},
      {"--heads H", "query heads (default " + n(d.heads) + ")"},
      {"--kv-heads Hk", "KV heads, H a multiple of Hk (default " + n(d.kv_heads) + ")"},
      {"--head-dim d", "head dimension, 1.." + n(kMaxHeadDim) + " on the CPU (default " + n(d.head_dim) + ")"},
      {"--dtype T", std::string("fp32, fp16 or bf16 (default ") + kCpuDefaults.dtype + " on the CPU, " +
                        kCudaDefaults.dtype + " on CUDA)"},
      {"--device D", "auto, cpu or cuda (default auto: CUDA when this build has it and a GPU is present)"},
      {"--repeats K",
       "timed runs, the median is reported (default " + per_device(kCpuDefaults.repeats, kCudaDefaults.repeats) + ")"},
      {"--warmups W", "untimed runs first (default " + per_device(kCpuDefaults.warmups, kCudaDefaults.warmups) + ")"},
      {"--cpu-threads K", "CPU worker threads, 0 = all cores (default " + n(RunSettings{}.cpu_threads) + ")"},
      {"--seed S", "seed of the inputs (default " + n(kDefaultSeed) + ")"},
  };
  std::string usage =
      "usage: dualkv_demo [flags]\n"
      "A synthetic shared-prompt batch through dualkv on the packed layout and through the N-copy layout a\n"
      "standard trainer uses (the same inputs, copied): forward and backward, the errors of O, LSE, dQ, dK\n"
      "and dV between the two, the token and query-key pair reductions and both times.\n";
  for (const auto& [flag, text] : flags)
    usage += "  " + std::string(flag) + std::string(kUsageFlagWidth - std::strlen(flag), ' ') + text + "\n";
  return usage;
}

}  // namespace dualkv::tools
