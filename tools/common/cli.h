// A minimal `--name value` flag parser for the command-line tools.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dualkv::tools {

class Flags {
 public:
  // Accepts `--name value` and `--name=value`; `--help` sets help().
  Flags(int argc, char** argv);

  int64_t get_int(const std::string& name, int64_t fallback);
  std::string get_string(const std::string& name, const std::string& fallback);
  bool help() const { return help_; }
  // Throws std::invalid_argument naming any flag that no get_* call asked for.
  void reject_unknown() const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> known_;
  bool help_ = false;
};

}  // namespace dualkv::tools
