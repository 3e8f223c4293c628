// A minimal `--name value` flag parser for the command-line tools.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dualkv::tools {

class Flags {
 public:
  // Accepts `--name value` and `--name=value`; `--help` sets help(). A flag followed by another
  // flag or by nothing has no value, which is an error only once get_int or get_string asks for
  // the flag (an unknown flag is reported as unknown, not as lacking a value).
  Flags(int argc, char** argv);

  // Throws std::invalid_argument naming the flag when its value is missing, not an integer, or
  // outside [min, max].
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max());
  std::string get_string(const std::string& name, const std::string& fallback);
  // An on/off flag: true when given without a value (`--name`), false when absent. Throws
  // std::invalid_argument naming the flag when it is given a value.
  bool get_switch(const std::string& name);
  bool help() const { return help_; }
  // Throws std::invalid_argument naming any flag that no get_* call asked for.
  void reject_unknown() const;

 private:
  // The value of a flag given on the command line, or nullopt when it was not; throws when it was
  // given without a value.
  std::optional<std::string> value_of(const std::string& name);

  std::map<std::string, std::optional<std::string>> values_;
  std::vector<std::string> known_;
  bool help_ = false;
};

}  // namespace dualkv::tools
