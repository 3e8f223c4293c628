// The N-copy layout a standard trainer uses: every response gets its own [prompt; response]
// sequence. Here it is a Layout of one group per response (a group with one response is plain
// causal attention), plus the packed row each N-copy row was copied from.
#pragma once

#include <cstdint>
#include <vector>

#include "dualkv/layout.h"

namespace dualkv::tools {

struct NCopyLayout {
  Layout layout;
  std::vector<int32_t> source_row;  // packed row of every N-copy row
  std::vector<bool> first_copy;     // false for prompt rows of the 2nd..Nth copy
};

NCopyLayout make_ncopy(const Layout& packed);

// Rows of a (rows, width) row-major array, copied to the N-copy order.
std::vector<float> gather_rows(const std::vector<float>& packed, int64_t width, const NCopyLayout& ncopy);

// Like gather_rows, but a prompt row's value goes to its first copy only and the other copies
// get zero: the upstream gradient of a prompt row is counted once, as in the packed batch.
std::vector<float> gather_rows_first_copy(const std::vector<float>& packed, int64_t width, const NCopyLayout& ncopy);

// Sums the N-copy rows back into packed rows (the gradient of a copied row is the sum).
std::vector<float> scatter_add_rows(const std::vector<float>& ncopy_values, int64_t width, const NCopyLayout& ncopy,
                                    int64_t packed_rows);

}  // namespace dualkv::tools
