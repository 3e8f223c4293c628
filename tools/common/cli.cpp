#include "common/cli.h"

#include <algorithm>
#include <stdexcept>

namespace dualkv::tools {

Flags::Flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      throw std::invalid_argument("unexpected argument '" + arg + "' (flags are --name value)");
    arg = arg.substr(2);
    const auto equals = arg.find('=');
    if (equals != std::string::npos) {
      values_[arg.substr(0, equals)] = arg.substr(equals + 1);
    } else if (i + 1 < argc) {
      values_[arg] = argv[++i];
    } else {
      throw std::invalid_argument("flag --" + arg + " needs a value");
    }
  }
}

int64_t Flags::get_int(const std::string& name, int64_t fallback) {
  known_.push_back(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  size_t used = 0;
  const int64_t value = std::stoll(it->second, &used);
  if (used != it->second.size())
    throw std::invalid_argument("--" + name + " must be an integer, got '" + it->second + "'");
  return value;
}

std::string Flags::get_string(const std::string& name, const std::string& fallback) {
  known_.push_back(name);
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

void Flags::reject_unknown() const {
  for (const auto& [name, value] : values_) {
    if (std::find(known_.begin(), known_.end(), name) == known_.end()) {
      throw std::invalid_argument("unknown flag --" + name + " (see --help)");
    }
  }
}

}  // namespace dualkv::tools
