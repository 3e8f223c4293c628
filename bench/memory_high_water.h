// Peak device memory of this process around a region, from cudaMemGetInfo: the drop in free
// memory between a baseline taken before the region's allocations and the lowest value sampled
// inside it. It sees every allocation (the caller's tensors, workspace, anything the library
// might allocate itself) that is alive at a sample point; the benchmark samples after each
// allocation step and after each synchronised call.
#pragma once

#include <cstddef>

namespace dualkv::bench {

class MemoryHighWater {
 public:
  MemoryHighWater();  // takes the baseline
  void sample();
  size_t peak_bytes() const { return baseline_free_ - lowest_free_; }

 private:
  size_t baseline_free_ = 0;
  size_t lowest_free_ = 0;
};

}  // namespace dualkv::bench
