// Checking that a call is rejected with dualkv::Error naming the right argument and rule.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>

namespace dualkv_test {

// A call that must be rejected, and how: `argument` must equal Error::argument() exactly, and
// `phrase` must occur (case-insensitively) in the rule, as the rule's key words.
struct BadCall {
  std::string name;  // test name suffix: letters, digits and underscores
  std::function<void()> call;
  std::string argument;
  std::string phrase;
};

inline void PrintTo(const BadCall& bad, std::ostream* os) { *os << bad.name; }

// Passes iff the call throws dualkv::Error with the expected argument and phrase; any other
// outcome (no throw, another exception type) fails with a description.
::testing::AssertionResult rejected_as_expected(const BadCall& bad);

// For INSTANTIATE_TEST_SUITE_P name generators.
std::string bad_call_name(const ::testing::TestParamInfo<BadCall>& info);

}  // namespace dualkv_test
