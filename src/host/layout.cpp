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

void check_cu_seqlens(const std::vector<int32_t>& cu_seqlens) {
  if (cu_seqlens.size() < 2) throw Error("cu_seqlens", "must have at least 2 entries (one segment)");
  if (cu_seqlens[0] != 0) throw Error("cu_seqlens[0]", "must be 0, got " + std::to_string(cu_seqlens[0]));
  for (size_t i = 1; i < cu_seqlens.size(); ++i) {
    if (cu_seqlens[i] <= cu_seqlens[i - 1]) {
      throw Error(indexed("cu_seqlens", i),
                  "offsets must be strictly increasing (every segment non-empty): " + std::to_string(cu_seqlens[i]) +
                      " follows " + std::to_string(cu_seqlens[i - 1]));
    }
  }
}

void check_groups(const std::vector<int32_t>& cu_groups, int64_t num_segments) {
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

// parents[s] in [-1, s). A cycle is named as one: following parents from its earliest segment
// leads back to it, and that segment's parent is the first entry to break the order rule.
template <typename Index>
void check_parents(const std::vector<Index>& parents) {
  const auto segments = static_cast<int64_t>(parents.size());
  for (int64_t s = 0; s < segments; ++s) {
    const int64_t parent = parents[s];
    const std::string argument = indexed("parents", static_cast<size_t>(s));
    if (parent < -1 || parent >= segments) {
      throw Error(argument, "must be -1 (a root) or the index of an earlier segment (< " + std::to_string(s) +
                                "), got " + std::to_string(parent));
    }
    if (parent < s) continue;
    std::string path = std::to_string(s);
    for (int64_t next = parent, steps = 0; next >= 0 && next < segments && steps <= segments;
         next = parents[next], ++steps) {
      path += " -> " + std::to_string(next);
      if (next == s) {
        throw Error(argument, "segments " + path +
                                  " form a cycle; a segment's parent must come before it in packed order (parents[" +
                                  std::to_string(s) + "] < " + std::to_string(s) + ")");
      }
    }
    throw Error(argument, "must be < " + std::to_string(s) +
                              " (a segment's parent comes before it in packed order) or -1 for a root, got " +
                              std::to_string(parent));
  }
}

// Appends a segment of `length` tokens to cu_seqlens; the error names the length that carries the
// total past int32. The total stays <= kMaxTokens before each addition and a length is < 2^63, so
// the sum cannot overflow int64. Every path's length is at most the total, so no position id
// overflows either.
void append_segment(std::vector<int32_t>& cu_seqlens, int64_t length, const std::string& argument) {
  if (length < 1) throw Error(argument, "must be >= 1, got " + std::to_string(length));
  const uint64_t new_total = static_cast<uint64_t>(cu_seqlens.back()) + static_cast<uint64_t>(length);
  if (new_total > static_cast<uint64_t>(kMaxTokens)) {
    throw Error(argument, "brings the total to " + std::to_string(new_total) + ", past the int32 range (" +
                              std::to_string(kMaxTokens) + " tokens)");
  }
  cu_seqlens.push_back(static_cast<int32_t>(new_total));
}

// The group offsets of a two-level tree (every root followed by its children, all leaves, at
// least one), else empty.
std::vector<int32_t> groups_of_two_level(const std::vector<int32_t>& parents) {
  std::vector<int32_t> cu_groups;
  int32_t root = -1;
  bool root_has_child = true;
  for (int32_t s = 0; s < static_cast<int32_t>(parents.size()); ++s) {
    if (parents[s] < 0) {
      if (!root_has_child) return {};
      root = s;
      root_has_child = false;
      cu_groups.push_back(s);
    } else if (parents[s] == root) {
      root_has_child = true;
    } else {
      return {};
    }
  }
  if (!root_has_child) return {};
  cu_groups.push_back(static_cast<int32_t>(parents.size()));
  return cu_groups;
}

int64_t causal_pairs(int64_t n) { return n * (n + 1) / 2; }

}  // namespace

Layout::Layout(std::vector<int32_t> cu_seqlens, std::vector<int32_t> parents)
    : cu_seqlens_(std::move(cu_seqlens)),
      parents_(std::move(parents)),
      cu_groups_(groups_of_two_level(parents_)),
      position_begins_(parents_.size()),
      plan_cache_(std::make_shared<detail::PlanCache>()) {
  std::vector<int32_t> depth_of(parents_.size());
  for (size_t s = 0; s < parents_.size(); ++s) {
    const int32_t parent = parents_[s];
    position_begins_[s] = parent < 0 ? 0 : position_begins_[parent] + segment_length(parent);
    depth_of[s] = parent < 0 ? 1 : depth_of[parent] + 1;
    depth_ = std::max(depth_, depth_of[s]);
  }
}

Layout Layout::from_lengths(const std::vector<int64_t>& prompt_lengths,
                            const std::vector<std::vector<int64_t>>& response_lengths) {
  if (prompt_lengths.empty()) throw Error("prompt_lengths", "must not be empty (at least one group)");
  if (response_lengths.size() != prompt_lengths.size()) {
    throw Error("response_lengths", "must have one entry per group: " + std::to_string(response_lengths.size()) +
                                        " entries for " + std::to_string(prompt_lengths.size()) + " prompts");
  }
  std::vector<int32_t> cu_seqlens{0};
  std::vector<int32_t> parents;
  for (size_t g = 0; g < prompt_lengths.size(); ++g) {
    const auto prompt = static_cast<int32_t>(parents.size());
    append_segment(cu_seqlens, prompt_lengths[g], indexed("prompt_lengths", g));
    parents.push_back(-1);
    if (response_lengths[g].empty()) {
      throw Error(indexed("response_lengths", g), "group " + std::to_string(g) + " must have at least one response");
    }
    for (size_t i = 0; i < response_lengths[g].size(); ++i) {
      append_segment(cu_seqlens, response_lengths[g][i],
                     indexed("response_lengths", g) + "[" + std::to_string(i) + "]");
      parents.push_back(prompt);
    }
  }
  return Layout(std::move(cu_seqlens), std::move(parents));
}

Layout Layout::from_offsets(std::vector<int32_t> cu_seqlens, std::vector<int32_t> cu_groups) {
  check_cu_seqlens(cu_seqlens);
  check_groups(cu_groups, static_cast<int64_t>(cu_seqlens.size()) - 1);
  std::vector<int32_t> parents;
  for (size_t g = 0; g + 1 < cu_groups.size(); ++g) {
    parents.push_back(-1);
    for (int32_t s = cu_groups[g] + 1; s < cu_groups[g + 1]; ++s) parents.push_back(cu_groups[g]);
  }
  return Layout(std::move(cu_seqlens), std::move(parents));
}

Layout Layout::from_tree(const std::vector<int64_t>& parents, const std::vector<int64_t>& lengths) {
  if (lengths.empty()) throw Error("lengths", "must not be empty (at least one segment)");
  if (parents.size() != lengths.size()) {
    throw Error("parents", "must have one entry per segment: " + std::to_string(parents.size()) + " entries for " +
                               std::to_string(lengths.size()) + " lengths");
  }
  check_parents(parents);
  std::vector<int32_t> cu_seqlens{0};
  for (size_t s = 0; s < lengths.size(); ++s) append_segment(cu_seqlens, lengths[s], indexed("lengths", s));
  return Layout(std::move(cu_seqlens), std::vector<int32_t>(parents.begin(), parents.end()));
}

Layout Layout::from_tree_offsets(std::vector<int32_t> cu_seqlens, std::vector<int32_t> parents) {
  check_cu_seqlens(cu_seqlens);
  if (parents.size() + 1 != cu_seqlens.size()) {
    throw Error("parents", "must have one entry per segment (" + std::to_string(cu_seqlens.size() - 1) +
                               ", from cu_seqlens), got " + std::to_string(parents.size()));
  }
  check_parents(parents);
  return Layout(std::move(cu_seqlens), std::move(parents));
}

int32_t Layout::max_segment_length() const {
  int32_t longest = 0;
  for (int32_t s = 0; s < num_segments(); ++s) longest = std::max(longest, segment_length(s));
  return longest;
}

int64_t Layout::visible_pairs() const {
  int64_t pairs = 0;
  for (int32_t s = 0; s < num_segments(); ++s) {
    const int64_t length = segment_length(s);
    pairs += length * position_begin(s) + causal_pairs(length);
  }
  return pairs;
}

namespace {

// Calls visit(path length) for every root-to-leaf path.
template <typename Visit>
void for_each_path(const Layout& layout, Visit visit) {
  std::vector<bool> has_child(static_cast<size_t>(layout.num_segments()), false);
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    if (layout.parent(s) >= 0) has_child[static_cast<size_t>(layout.parent(s))] = true;
  }
  for (int32_t s = 0; s < layout.num_segments(); ++s) {
    if (!has_child[static_cast<size_t>(s)]) visit(int64_t{layout.position_begin(s)} + layout.segment_length(s));
  }
}

}  // namespace

int64_t Layout::ncopy_tokens() const {
  int64_t tokens = 0;
  for_each_path(*this, [&](int64_t length) { tokens += length; });
  return tokens;
}

int64_t Layout::ncopy_pairs() const {
  int64_t pairs = 0;
  for_each_path(*this, [&](int64_t length) { pairs += causal_pairs(length); });
  return pairs;
}

}  // namespace dualkv
