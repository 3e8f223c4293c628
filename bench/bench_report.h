// The benchmark's outputs: a human-readable table and a JSON file for run_gpu_bench.sh.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "config_runner.h"

namespace dualkv::bench {

// The run's kernel family and backward mode, then the column names.
void print_header(std::ostream& out, const RunOptions& options);
void print_row(std::ostream& out, const BenchResult& result);
void print_table(std::ostream& out, const RunOptions& options, const std::vector<BenchResult>& results);

// {"device": ..., "kernel_family": ..., "deterministic": ..., "results": [{...}, ...]}; a failed
// configuration carries "failure". kernel_family: the --kernel-family both passes ran with;
// deterministic: whether the backward ran in its deterministic mode (--deterministic).
void write_json(const std::string& path, const std::string& device_name, const RunOptions& options,
                const std::vector<BenchResult>& results);

}  // namespace dualkv::bench
