// dualkv_bench: the CUDA path's forward/backward speed and memory on the benchmark shapes (docs/benchmarks.md).
//
//   dualkv_bench [--configs all|NxP|P:R1/R2/...,...] [--dtype fp16|bf16|both] [--repeats 10] [--warmups 2]
//                [--max-shared-memory BYTES] [--kernel-family auto|portable|hopper] [--deterministic]
//                [--head-dim 128] [--heads 32] [--kv-heads 8] [--json PATH]
//
// --configs: "all" (the five benchmark shapes), or items "NxP" (N responses of R = 2048) or
// "P:R1/R2/.../RN" (ragged responses of the given lengths, e.g. a training step's micro-batch).
// --head-dim runs every configuration at that head dimension instead of Qwen3-8B's 128 (the
// configuration names then end in _d<head_dim>, as baselines.py's do); --heads and --kv-heads the
// query and KV heads instead of Qwen3-8B's 32 and 8 (names then carry _H<heads>k<kv_heads>).
// --kernel-family forces the kernel family of both passes (ExecutionOptions::kernel_family).
// --deterministic times the deterministic backward (BackwardParams::deterministic: no float
// atomics, bitwise-identical reruns) instead of the default one. The header above each table and
// the JSON record both.
// --max-shared-memory caps the shared memory per block of every call (ExecutionOptions::
// max_shared_memory_per_block): 101376 times the tiles an sm_86/sm_89 GPU runs. The device line of
// the table and the JSON says so.
//
// Times are CUDA-event medians over --repeats runs after --warmups runs, rotating over two input
// sets where memory allows: forward and backward alternating, then --repeats forwards back to back
// ("fwd alone": the forward's speed at the clock its own power draw sets, not the one the
// preceding backward left); TFLOP/s count the deduplicated pairs (forward 4 d H pairs, backward
// 2.5x). Peak memory is the process's cudaMemGetInfo high-water mark around one forward +
// backward, next to the bytes of Q, K, V, O, dO, dQ, dK, dV.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_configs.h"
#include "bench_report.h"
#include "common/cli.h"
#include "config_runner.h"

namespace {

constexpr int kMinRepeats = 10;

const char* const kUsage =
    "usage: dualkv_bench [--configs all|NxP|P:R1/R2/...,...] [--dtype fp16|bf16|both] [--repeats N>=10] [--warmups N] "
    "[--max-shared-memory BYTES] [--kernel-family auto|portable|hopper] [--deterministic] [--head-dim D] "
    "[--heads H] [--kv-heads HK] [--json PATH]\n";

bool is_out_of_memory(const std::string& message) {
  return message.find("out of memory") != std::string::npos ||
         message.find("cudaErrorMemoryAllocation") != std::string::npos;
}

std::string device_name(size_t max_shared_memory_per_block) {
  cudaDeviceProp properties{};
  const std::string name = cudaGetDeviceProperties(&properties, 0) == cudaSuccess ? properties.name : "unknown";
  if (max_shared_memory_per_block == 0) return name;
  return name + " (shared memory per block capped at " + std::to_string(max_shared_memory_per_block) + " bytes)";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dualkv::bench;
  try {
    dualkv::tools::Flags flags(argc, argv);
    std::vector<BenchConfig> configs = parse_configs(flags.get_string("configs", "all"));
    const int64_t head_dim = flags.get_int("head-dim", BenchConfig{}.head_dim);
    const int64_t heads = flags.get_int("heads", BenchConfig{}.heads);
    const int64_t kv_heads = flags.get_int("kv-heads", BenchConfig{}.kv_heads);
    if (head_dim <= 0) throw std::invalid_argument("--head-dim must be > 0");
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0) {
      throw std::invalid_argument("--heads and --kv-heads must be > 0 with --heads a multiple of --kv-heads");
    }
    for (BenchConfig& config : configs) {
      config.head_dim = head_dim;
      config.heads = heads;
      config.kv_heads = kv_heads;
    }
    const std::vector<dualkv::DType> dtypes = parse_dtypes(flags.get_string("dtype", "both"));
    RunOptions options;
    options.repeats = static_cast<int>(flags.get_int("repeats", kMinRepeats));
    options.warmups = static_cast<int>(flags.get_int("warmups", options.warmups));
    const int64_t max_shared_memory = flags.get_int("max-shared-memory", 0);
    if (max_shared_memory < 0) throw std::invalid_argument("--max-shared-memory must be >= 0 (0: the device's limit)");
    options.max_shared_memory_per_block = static_cast<size_t>(max_shared_memory);
    options.kernel_family = parse_kernel_family(flags.get_string("kernel-family", "auto"));
    options.deterministic = flags.get_switch("deterministic");
    const std::string json = flags.get_string("json", "");
    flags.reject_unknown();
    if (flags.help()) {
      std::cout << kUsage;
      return 0;
    }
    if (options.repeats < kMinRepeats) throw std::invalid_argument("--repeats must be >= 10 (medians of 10+ runs)");

    std::vector<BenchResult> results;
    print_header(std::cout, options);
    for (const dualkv::DType dtype : dtypes) {
      for (const BenchConfig& config : configs) {
        try {
          results.push_back(run_config(config, dtype, options));
        } catch (const std::exception& error) {
          cudaGetLastError();  // an allocation failure is not sticky; clear it for the next shape
          BenchResult failed;
          failed.config = config;
          failed.dtype = dtype;
          failed.failure = is_out_of_memory(error.what()) ? "OOM" : std::string("error: ") + error.what();
          results.push_back(failed);
        }
        print_row(std::cout, results.back());
      }
    }
    const std::string device = device_name(options.max_shared_memory_per_block);
    std::cout << "\n" << device << "\n";
    print_table(std::cout, options, results);
    if (!json.empty()) write_json(json, device, options, results);
    const bool all_failed =
        std::all_of(results.begin(), results.end(), [](const BenchResult& r) { return !r.failure.empty(); });
    return all_failed ? 1 : 0;
  } catch (const std::exception& error) {
    std::cerr << "dualkv_bench: " << error.what() << "\n" << kUsage;
    return 2;
  }
}
