// Parallel loop over a list of independent work items on std::thread workers.
//
// Items are claimed in list order from one shared atomic counter, so a list ordered heaviest
// first balances itself. Every item is run exactly once by exactly one worker; as long as items
// write disjoint outputs, the result does not depend on the number of threads.
#pragma once

#include <cstdint>
#include <functional>

namespace dualkv::detail::cpu {

// The worker count for ExecutionOptions::cpu_threads: 0 means one per hardware thread.
int resolve_thread_count(int requested);

// Runs body(i) for every i in [0, num_items) on at most num_threads threads (the caller's thread
// is one of them). The first exception thrown by a body stops further claims and is rethrown
// here once every worker has finished.
void parallel_for(int64_t num_items, int num_threads, const std::function<void(int64_t)>& body);

}  // namespace dualkv::detail::cpu
