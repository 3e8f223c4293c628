#include "common/ncopy.h"

#include <algorithm>

namespace dualkv::tools {

NCopyLayout make_ncopy(const Layout& packed) {
  std::vector<int64_t> prompt_lengths;
  std::vector<std::vector<int64_t>> response_lengths;
  std::vector<int32_t> source_row;
  std::vector<bool> first_copy;
  for (int32_t g = 0; g < packed.num_groups(); ++g) {
    for (int32_t i = 0; i < packed.num_responses(g); ++i) {
      const int32_t segment = packed.prompt_segment(g) + 1 + i;
      prompt_lengths.push_back(packed.prompt_length(g));
      response_lengths.push_back({packed.segment_end(segment) - packed.segment_begin(segment)});
      for (int32_t row = packed.prompt_begin(g); row < packed.prompt_end(g); ++row) {
        source_row.push_back(row);
        first_copy.push_back(i == 0);
      }
      for (int32_t row = packed.segment_begin(segment); row < packed.segment_end(segment); ++row) {
        source_row.push_back(row);
        first_copy.push_back(true);
      }
    }
  }
  return {Layout::from_lengths(prompt_lengths, response_lengths), std::move(source_row), std::move(first_copy)};
}

std::vector<float> gather_rows(const std::vector<float>& packed, int64_t width, const NCopyLayout& ncopy) {
  std::vector<float> out(ncopy.source_row.size() * width);
  for (size_t row = 0; row < ncopy.source_row.size(); ++row) {
    std::copy_n(packed.begin() + ncopy.source_row[row] * width, width, out.begin() + row * width);
  }
  return out;
}

std::vector<float> gather_rows_first_copy(const std::vector<float>& packed, int64_t width, const NCopyLayout& ncopy) {
  std::vector<float> out = gather_rows(packed, width, ncopy);
  for (size_t row = 0; row < ncopy.source_row.size(); ++row) {
    if (!ncopy.first_copy[row]) std::fill_n(out.begin() + row * width, width, 0.0f);
  }
  return out;
}

std::vector<float> scatter_add_rows(const std::vector<float>& ncopy_values, int64_t width, const NCopyLayout& ncopy,
                                    int64_t packed_rows) {
  // Summed in double so that the comparison measures the kernels, not this reduction.
  std::vector<double> sum(packed_rows * width, 0.0);
  for (size_t row = 0; row < ncopy.source_row.size(); ++row) {
    for (int64_t c = 0; c < width; ++c) sum[ncopy.source_row[row] * width + c] += ncopy_values[row * width + c];
  }
  return std::vector<float>(sum.begin(), sum.end());
}

}  // namespace dualkv::tools
