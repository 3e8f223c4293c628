#include "bench_report.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace dualkv::bench {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// "R": one length, or the ragged lengths as a list.
std::string response_json(const BenchConfig& config) {
  if (config.response_lengths.empty()) return std::to_string(config.response);
  std::string list = "[";
  for (size_t i = 0; i < config.response_lengths.size(); ++i) {
    list += (i ? ", " : "") + std::to_string(config.response_lengths[i]);
  }
  return list + "]";
}

}  // namespace

void print_header(std::ostream& out, const RunOptions& options) {
  out << "kernel family: " << kernel_family_name(options.kernel_family)
      << "; deterministic backward: " << (options.deterministic ? "yes" : "no") << "\n";
  out << "config        dtype     fwd ms   bwd ms  fwd TF/s  bwd TF/s  peak GiB  tensors GiB  peak/tensors"
         "  fwd alone ms  fwd alone TF/s\n";
}

void print_row(std::ostream& out, const BenchResult& r) {
  char line[256];
  if (!r.failure.empty()) {
    std::snprintf(line, sizeof line, "%-13s %-8s %s\n", r.config.name().c_str(), dtype_name(r.dtype),
                  r.failure.c_str());
  } else {
    std::snprintf(line, sizeof line, "%-13s %-8s %8.2f %8.2f %9.1f %9.1f %9.2f %12.2f %13.2f %13.2f %15.1f\n",
                  r.config.name().c_str(), dtype_name(r.dtype), r.forward_ms, r.backward_ms, r.forward_tflops,
                  r.backward_tflops, r.peak_bytes / kGiB, r.tensor_bytes / kGiB,
                  static_cast<double>(r.peak_bytes) / static_cast<double>(r.tensor_bytes), r.forward_alone_ms,
                  r.forward_alone_tflops);
  }
  out << line << std::flush;
}

void print_table(std::ostream& out, const RunOptions& options, const std::vector<BenchResult>& results) {
  print_header(out, options);
  for (const BenchResult& r : results) print_row(out, r);
}

void write_json(const std::string& path, const std::string& device_name, const RunOptions& options,
                const std::vector<BenchResult>& results) {
  std::ofstream file(path);
  if (!file) throw std::runtime_error("cannot write " + path);
  file << "{\n  \"device\": \"" << device_name << "\",\n  \"kernel_family\": \""
       << kernel_family_name(options.kernel_family)
       << "\",\n  \"deterministic\": " << (options.deterministic ? "true" : "false") << ",\n  \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const BenchResult& r = results[i];
    file << "    {\"config\": \"" << r.config.name() << "\", \"dtype\": \"" << dtype_name(r.dtype)
         << "\", \"N\": " << r.config.responses << ", \"P\": " << r.config.prompt
         << ", \"R\": " << response_json(r.config) << ", \"H\": " << r.config.heads << ", \"Hk\": " << r.config.kv_heads
         << ", \"d\": " << r.config.head_dim << ", \"pairs\": " << r.config.layout().visible_pairs();
    if (!r.failure.empty()) {
      file << ", \"failure\": \"" << r.failure << "\"}";
    } else {
      file << ", \"repeats\": " << r.repeats << ", \"input_sets\": " << r.input_sets
           << ", \"forward_ms\": " << format("%.4f", r.forward_ms)
           << ", \"backward_ms\": " << format("%.4f", r.backward_ms)
           << ", \"forward_tflops\": " << format("%.2f", r.forward_tflops)
           << ", \"backward_tflops\": " << format("%.2f", r.backward_tflops)
           << ", \"forward_alone_ms\": " << format("%.4f", r.forward_alone_ms)
           << ", \"forward_alone_tflops\": " << format("%.2f", r.forward_alone_tflops)
           << ", \"peak_bytes\": " << r.peak_bytes << ", \"tensor_bytes\": " << r.tensor_bytes << "}";
    }
    file << (i + 1 < results.size() ? ",\n" : "\n");
  }
  file << "  ]\n}\n";
}

}  // namespace dualkv::bench
