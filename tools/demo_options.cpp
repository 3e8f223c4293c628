#include "demo_options.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/cli.h"
#include "common/device_buffer.h"

namespace dualkv::tools {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxHeadDim = 256;

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
  shape.ragged = flags.get_int("ragged", 1, 0, 1) == 1;
  shape.heads = flags.get_int("heads", shape.heads, 1, kMaxInt);
  shape.kv_heads = flags.get_int("kv-heads", shape.kv_heads, 1, kMaxInt);
  shape.head_dim = flags.get_int("head-dim", shape.head_dim, 1, kMaxHeadDim);
  shape.seed = static_cast<uint64_t>(flags.get_int("seed", 1));
  options.device = parse_device(flags.get_string("device", "auto"));
  const bool on_cuda = options.device.kind == DeviceKind::kCuda;
  shape.dtype = parse_dtype(flags.get_string("dtype", on_cuda ? "bf16" : "fp32"));
  options.timing.warmups = static_cast<int>(flags.get_int("warmups", on_cuda ? 3 : 0, 0, kMaxInt));
  options.timing.repeats = static_cast<int>(flags.get_int("repeats", on_cuda ? 10 : 1, 1, kMaxInt));
  options.timing.cpu_threads = static_cast<int>(flags.get_int("cpu-threads", 0, 0, kMaxInt));
  if (options.help) return options;
  flags.reject_unknown();
  if (shape.heads % shape.kv_heads != 0) {
    throw std::invalid_argument("--heads (" + std::to_string(shape.heads) + ") must be a multiple of --kv-heads (" +
                                std::to_string(shape.kv_heads) + ")");
  }
  check_token_range(shape);
  return options;
}

}  // namespace dualkv::tools
