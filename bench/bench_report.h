// The benchmark's outputs: a human-readable table and a JSON file for run_gpu_bench.sh.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "config_runner.h"

namespace dualkv::bench {

void print_header(std::ostream& out);
void print_row(std::ostream& out, const BenchResult& result);
void print_table(std::ostream& out, const std::vector<BenchResult>& results);  // header and rows

// {"device": ..., "kernel_family": ..., "results": [{...}, ...]}; a failed configuration carries
// "failure". kernel_family: the --kernel-family the forward ran with.
void write_json(const std::string& path, const std::string& device_name, const std::string& kernel_family,
                const std::vector<BenchResult>& results);

}  // namespace dualkv::bench
