#include "cpu/expect_error.h"

#include <algorithm>
#include <cctype>
#include <exception>

#include "dualkv/errors.h"

namespace dualkv_test {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

::testing::AssertionResult rejected_as_expected(const BadCall& bad) {
  try {
    bad.call();
  } catch (const dualkv::Error& error) {
    if (error.argument() != bad.argument) {
      return ::testing::AssertionFailure() << "named argument '" << error.argument() << "', expected '" << bad.argument
                                           << "' (" << error.what() << ")";
    }
    if (lower(error.rule()).find(lower(bad.phrase)) == std::string::npos) {
      return ::testing::AssertionFailure() << "rule \"" << error.rule() << "\" lacks \"" << bad.phrase << "\"";
    }
    if (std::string(error.what()).find(bad.argument) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << error.what() << "\" does not name the argument";
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& other) {
    return ::testing::AssertionFailure() << "threw another exception type: " << other.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw a non-std exception";
  }
  return ::testing::AssertionFailure() << "was accepted";
}

std::string bad_call_name(const ::testing::TestParamInfo<BadCall>& info) { return info.param.name; }

}  // namespace dualkv_test
