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

// {"device": ..., "results": [{...}, ...]}; a failed configuration carries "failure".
void write_json(const std::string& path, const std::string& device_name, const std::vector<BenchResult>& results);

}  // namespace dualkv::bench
