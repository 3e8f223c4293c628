#include "bench_configs.h"

#include <sstream>
#include <stdexcept>

namespace dualkv::bench {

// Backward = dV, dP, dQ, dK products (4) plus recomputing S (1) against the forward's S and PV (2).
constexpr double kBackwardFlopRatio = 2.5;

std::string BenchConfig::name() const {
  const std::string shape = "N" + std::to_string(responses) + "_P" + std::to_string(prompt);
  return head_dim == BenchConfig{}.head_dim ? shape : shape + "_d" + std::to_string(head_dim);
}

Layout BenchConfig::layout() const {
  return Layout::from_lengths({prompt}, {std::vector<int64_t>(static_cast<size_t>(responses), response)});
}

std::vector<BenchConfig> design_configs() {
  std::vector<BenchConfig> configs;
  for (const auto& [responses, prompt] :
       std::vector<std::pair<int64_t, int64_t>>{{28, 4096}, {28, 16384}, {16, 32768}, {28, 32768}, {16, 65536}}) {
    BenchConfig config;
    config.responses = responses;
    config.prompt = prompt;
    configs.push_back(config);
  }
  return configs;
}

std::vector<BenchConfig> parse_configs(const std::string& text) {
  if (text == "all") return design_configs();
  std::vector<BenchConfig> configs;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto x = item.find('x');
    if (x == std::string::npos) throw std::invalid_argument("--configs: expected NxP items, got '" + item + "'");
    BenchConfig config;
    config.responses = std::stoll(item.substr(0, x));
    config.prompt = std::stoll(item.substr(x + 1));
    configs.push_back(config);
  }
  if (configs.empty()) throw std::invalid_argument("--configs: no configuration given");
  return configs;
}

std::vector<DType> parse_dtypes(const std::string& text) {
  if (text == "fp16") return {DType::kFloat16};
  if (text == "bf16") return {DType::kBFloat16};
  if (text == "both") return {DType::kFloat16, DType::kBFloat16};
  throw std::invalid_argument("--dtype must be fp16, bf16 or both, got '" + text + "'");
}

double forward_flops(const BenchConfig& config) {
  return 4.0 * static_cast<double>(config.head_dim) * static_cast<double>(config.heads) *
         static_cast<double>(config.layout().visible_pairs());
}

double backward_flops(const BenchConfig& config) { return kBackwardFlopRatio * forward_flops(config); }

}  // namespace dualkv::bench
