// Layout factories: every rule of include/dualkv/layout.h checked before a Layout exists.
#include "dualkv/layout.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "dualkv/errors.h"
#include "host/plan_cache.h"

namespace dualkv {
namespace {

constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();

std::string indexed(const char* name, size_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

void check_offsets(const std::vector<int32_t>& cu_seqlens, const std::vector<int32_t>& cu_groups) {
  if (cu_seqlens.size() < 2) throw Error("cu_seqlens", "must have at least 2 entries (one segment)");
  if (cu_seqlens[0] != 0) throw Error("cu_seqlens[0]", "must be 0, got " + std::to_string(cu_seqlens[0]));
  for (size_t i = 1; i < cu_seqlens.size(); ++i) {
    if (cu_seqlens[i] <= cu_seqlens[i - 1]) {
      throw Error(indexed("cu_seqlens", i),
                  "offsets must be strictly increasing (every segment non-empty): " + std::to_string(cu_seqlens[i]) +
                      " follows " + std::to_string(cu_seqlens[i - 1]));
    }
  }
  const auto num_segments = static_cast<int64_t>(cu_seqlens.size()) - 1;
  if (cu_groups.size() < 2) throw Error("cu_groups", "must have at least 2 entries (one group)");
  if (cu_groups[0] != 0) throw Error("cu_groups[0]", "must be 0, got " + std::to_string(cu_groups[0]));
  const size_t last = cu_groups.size() - 1;
  if (cu_groups[last] != num_segments) {
    throw Error(indexed("cu_groups", last), "must equal the number of segments (" + std::to_string(num_segments) +
                                                "), got " + std::to_string(cu_groups[last]));
  }
  for (size_t g = 1; g < cu_groups.size(); ++g) {
    if (static_cast<int64_t>(cu_groups[g]) < static_cast<int64_t>(cu_groups[g - 1]) + 2) {
      throw Error(indexed("cu_groups", g),
                  "group " + std::to_string(g - 1) + " must hold a prompt and at least one response (segments " +
                      std::to_string(cu_groups[g - 1]) + ".." + std::to_string(cu_groups[g]) + ")");
    }
  }
}

}  // namespace

Layout::Layout(std::vector<int32_t> cu_seqlens, std::vector<int32_t> cu_groups)
    : cu_seqlens_(std::move(cu_seqlens)),
      cu_groups_(std::move(cu_groups)),
      plan_cache_(std::make_shared<detail::PlanCache>()) {}

Layout Layout::from_lengths(const std::vector<int64_t>& prompt_lengths,
                            const std::vector<std::vector<int64_t>>& response_lengths) {
  if (prompt_lengths.empty()) throw Error("prompt_lengths", "must not be empty (at least one group)");
  if (response_lengths.size() != prompt_lengths.size()) {
    throw Error("response_lengths", "must have one entry per group: " + std::to_string(response_lengths.size()) +
                                        " entries for " + std::to_string(prompt_lengths.size()) + " prompts");
  }
  std::vector<int32_t> cu_seqlens{0};
  std::vector<int32_t> cu_groups{0};
  int64_t total = 0;
  // The total stays <= kMaxTokens before each addition and a length is < 2^63, so the sum cannot
  // overflow int64; the error names the length that carries it past int32.
  auto append_segment = [&](int64_t length, const std::string& argument) {
    if (length < 1) throw Error(argument, "must be >= 1, got " + std::to_string(length));
    const uint64_t new_total = static_cast<uint64_t>(total) + static_cast<uint64_t>(length);
    if (new_total > static_cast<uint64_t>(kMaxTokens)) {
      throw Error(argument, "brings the total to " + std::to_string(new_total) + ", past the int32 range (" +
                                std::to_string(kMaxTokens) + " tokens)");
    }
    total = static_cast<int64_t>(new_total);
    cu_seqlens.push_back(static_cast<int32_t>(total));
  };
  for (size_t g = 0; g < prompt_lengths.size(); ++g) {
    append_segment(prompt_lengths[g], indexed("prompt_lengths", g));
    if (response_lengths[g].empty()) {
      throw Error(indexed("response_lengths", g), "group " + std::to_string(g) + " must have at least one response");
    }
    for (size_t i = 0; i < response_lengths[g].size(); ++i) {
      append_segment(response_lengths[g][i], indexed("response_lengths", g) + "[" + std::to_string(i) + "]");
    }
    cu_groups.push_back(static_cast<int32_t>(cu_seqlens.size() - 1));
  }
  return Layout(std::move(cu_seqlens), std::move(cu_groups));
}

Layout Layout::from_offsets(std::vector<int32_t> cu_seqlens, std::vector<int32_t> cu_groups) {
  check_offsets(cu_seqlens, cu_groups);
  return Layout(std::move(cu_seqlens), std::move(cu_groups));
}

int32_t Layout::max_segment_length() const {
  int32_t longest = 0;
  for (int32_t s = 0; s < num_segments(); ++s) longest = std::max(longest, segment_end(s) - segment_begin(s));
  return longest;
}

namespace {
int64_t causal_pairs(int64_t n) { return n * (n + 1) / 2; }
}  // namespace

int64_t Layout::visible_pairs() const {
  int64_t pairs = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int64_t p = prompt_length(g);
    pairs += causal_pairs(p);
    for (int32_t s = prompt_segment(g) + 1; s < cu_groups_[g + 1]; ++s) {
      const int64_t r = segment_end(s) - segment_begin(s);
      pairs += r * p + causal_pairs(r);
    }
  }
  return pairs;
}

int64_t Layout::ncopy_tokens() const {
  int64_t tokens = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    tokens += static_cast<int64_t>(num_responses(g)) * prompt_length(g) + (group_end(g) - prompt_end(g));
  }
  return tokens;
}

int64_t Layout::ncopy_pairs() const {
  int64_t pairs = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    for (int32_t s = prompt_segment(g) + 1; s < cu_groups_[g + 1]; ++s) {
      pairs += causal_pairs(static_cast<int64_t>(prompt_length(g)) + (segment_end(s) - segment_begin(s)));
    }
  }
  return pairs;
}

}  // namespace dualkv
