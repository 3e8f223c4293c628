#include "bench_configs.h"

#include <algorithm>
#include <stdexcept>

namespace dualkv::bench {

// Backward = dV, dP, dQ, dK products (4) plus recomputing S (1) against the forward's S and PV (2).
constexpr double kBackwardFlopRatio = 2.5;

std::string BenchConfig::name() const {
  std::string shape = "N" + std::to_string(responses) + "_P" + std::to_string(prompt);
  if (!response_lengths.empty()) {
    const auto [shortest, longest] = std::minmax_element(response_lengths.begin(), response_lengths.end());
    shape += "_R" + std::to_string(*shortest) + "-" + std::to_string(*longest);
  }
  const BenchConfig design;
  if (heads != design.heads || kv_heads != design.kv_heads) {
    shape += "_H" + std::to_string(heads) + "k" + std::to_string(kv_heads);
  }
  return head_dim == design.head_dim ? shape : shape + "_d" + std::to_string(head_dim);
}

Layout BenchConfig::layout() const {
  if (!response_lengths.empty()) return Layout::from_lengths({prompt}, {response_lengths});
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

namespace {

// The pieces of `text` between separators, empty ones included ("a,,b," has four).
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces(1);
  for (const char c : text) {
    if (c == separator) {
      pieces.emplace_back();
    } else {
      pieces.back() += c;
    }
  }
  return pieces;
}

// A token count of a --configs item: digits only, >= 1.
int64_t parse_length(const std::string& text, const std::string& item) {
  const bool digits = !text.empty() && text.size() <= 9 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoll(text) < 1) {
    throw std::invalid_argument("--configs: lengths must be integers >= 1, got '" + text + "' in '" + item + "'");
  }
  return std::stoll(text);
}

// "NxP" or "P:R1/R2/.../RN".
BenchConfig parse_item(const std::string& item) {
  BenchConfig config;
  if (const auto colon = item.find(':'); colon != std::string::npos) {
    config.prompt = parse_length(item.substr(0, colon), item);
    for (const std::string& length : split(item.substr(colon + 1), '/')) {
      config.response_lengths.push_back(parse_length(length, item));
    }
    config.responses = static_cast<int64_t>(config.response_lengths.size());
    return config;
  }
  const auto x = item.find('x');
  if (x == std::string::npos) {
    throw std::invalid_argument("--configs: expected NxP or P:R1/R2/... items, got '" + item + "'");
  }
  config.responses = parse_length(item.substr(0, x), item);
  config.prompt = parse_length(item.substr(x + 1), item);
  return config;
}

}  // namespace

std::vector<BenchConfig> parse_configs(const std::string& text) {
  if (text == "all") return design_configs();
  std::vector<BenchConfig> configs;
  for (const std::string& item : split(text, ',')) configs.push_back(parse_item(item));
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
