// The command line of dualkv_demo: every flag checked against its range before anything is
// allocated, so a mistyped flag is an error naming it, never a clamp, a wrap or an allocation
// failure.
#pragma once

#include <string>

#include "common/runner.h"
#include "common/synthetic_batch.h"
#include "dualkv/dualkv.h"

namespace dualkv::tools {

struct DemoOptions {
  BatchShape shape;
  Device device;
  RunSettings timing;
  bool help = false;
};

// Throws std::invalid_argument naming the flag and the rule it broke.
DemoOptions parse_demo_options(int argc, char** argv);

// What --help prints: every flag with its default.
std::string demo_usage();

}  // namespace dualkv::tools
