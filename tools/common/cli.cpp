#include "common/cli.h"

#include <algorithm>
#include <stdexcept>

namespace dualkv::tools {
namespace {

bool is_flag(const std::string& arg) { return arg.rfind("--", 0) == 0; }

}  // namespace

Flags::Flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (!is_flag(arg)) throw std::invalid_argument("unexpected argument '" + arg + "' (flags are --name value)");
    arg = arg.substr(2);
    const auto equals = arg.find('=');
    if (equals != std::string::npos) {
      values_[arg.substr(0, equals)] = arg.substr(equals + 1);
    } else if (i + 1 < argc && !is_flag(argv[i + 1])) {
      values_[arg] = argv[++i];
    } else {
      values_[arg] = std::nullopt;
    }
  }
}

std::optional<std::string> Flags::value_of(const std::string& name) {
  known_.push_back(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  if (!it->second) throw std::invalid_argument("flag --" + name + " needs a value");
  return it->second;
}

int64_t Flags::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  const std::optional<std::string> text = value_of(name);
  if (!text) return fallback;
  int64_t value = 0;
  size_t used = 0;
  try {
    value = std::stoll(*text, &used);
  } catch (const std::out_of_range&) {
    throw std::invalid_argument("--" + name + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                "], got '" + *text + "'");
  } catch (const std::invalid_argument&) {
    used = 0;
  }
  if (used == 0 || used != text->size()) {
    throw std::invalid_argument("--" + name + " must be an integer, got '" + *text + "'");
  }
  if (value < min || value > max) {
    throw std::invalid_argument("--" + name + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                "], got " + std::to_string(value));
  }
  return value;
}

std::string Flags::get_string(const std::string& name, const std::string& fallback) {
  return value_of(name).value_or(fallback);
}

bool Flags::get_switch(const std::string& name) {
  known_.push_back(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return false;
  if (it->second) throw std::invalid_argument("flag --" + name + " takes no value, got '" + *it->second + "'");
  return true;
}

void Flags::reject_unknown() const {
  for (const auto& [name, value] : values_) {
    if (std::find(known_.begin(), known_.end(), name) == known_.end()) {
      throw std::invalid_argument("unknown flag --" + name + " (see --help)");
    }
  }
}

}  // namespace dualkv::tools
