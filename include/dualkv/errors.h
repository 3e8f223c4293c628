// Errors raised by every public entry point of dualkv.
//
// Bad input is reported before any computation as dualkv::Error, which names the offending
// argument and the rule it broke; the Python binding turns it into ValueError. Failures of the
// CUDA runtime itself (out of memory, launch failure) are dualkv::RuntimeError.
#pragma once

#include <stdexcept>
#include <string>

namespace dualkv {

class Error : public std::invalid_argument {
 public:
  Error(std::string argument, std::string rule)
      : std::invalid_argument("dualkv: invalid argument '" + argument + "': " + rule),
        argument_(std::move(argument)),
        rule_(std::move(rule)) {}

  // The name of the argument (or argument field, e.g. "cu_seqlens[3]") that broke a rule.
  const std::string& argument() const noexcept { return argument_; }
  // The rule, in words, e.g. "must be divisible by k.heads (8)".
  const std::string& rule() const noexcept { return rule_; }

 private:
  std::string argument_;
  std::string rule_;
};

class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& what) : std::runtime_error("dualkv: " + what) {}
};

}  // namespace dualkv
