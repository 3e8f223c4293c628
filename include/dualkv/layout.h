// The packed layout: a forest of segments in packed order.
//
// Tree layouts (multi-turn and branching rollouts): segments in packed order, parents[s] the
// index of segment s's parent (< s) or -1 for a root. A query in segment s sees the earlier
// tokens of s and every token of every ancestor of s; nothing else. Position ids continue along
// the path: segment s starts at the total length of its ancestors.
//
// Two-level layouts (GRPO/DAPO groups) are the depth-2 case, with their own group API: G prompt
// groups packed back to back,
//     [ prompt_0 | resp_0,0 | ... | resp_0,N0-1 | prompt_1 | resp_1,0 | ... ]
// Representation (varlen style, int32):
//   cu_seqlens: S+1 offsets over all S segments in packed order, prompts and responses alike;
//               segment s covers tokens [cu_seqlens[s], cu_seqlens[s+1]); cu_seqlens[0] == 0 and
//               cu_seqlens[S] == T.
//   cu_groups:  G+1 segment indices; group g owns segments [cu_groups[g], cu_groups[g+1]), the
//               first of which is its prompt and the rest its N_g >= 1 responses;
//               cu_groups[0] == 0 and cu_groups[G] == S.
// Visibility: query q sees key k iff both are in the same group, k <= q, and k is in the group's
// prompt or in q's own segment (a prompt is the root, its responses its children).
// A tree whose every root is followed by its children, all leaves, at least one, is two-level
// however it was built: it has cu_groups and the group API. Other trees have no groups
// (num_groups() == 0, cu_groups() empty); the group accessors are for two-level layouts only.
//
// A Layout is always valid: every factory checks every rule and throw dualkv::Error naming the
// offending argument. What it describes never changes. It holds host copies of the offsets, and
// the CUDA path keeps with it the device work plans it builds from them: the first call on a
// device (for a head dim and kernel shape) builds and uploads one, later calls with this Layout or
// a copy of it reuse it, and the last copy frees it. Several threads may use one Layout at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace dualkv {

class Layout;

namespace detail {
class PlanCache;
// The device work plans kept with `layout` (src/host/plan_cache.h).
PlanCache& plan_cache(const Layout& layout);
}  // namespace detail

class Layout {
 public:
  // prompt_lengths[g] = P_g >= 1; response_lengths[g] = {R_g,0, ...}, non-empty, each >= 1.
  // Lengths are int64 so that a total past the int32 range is reported, not wrapped.
  static Layout from_lengths(const std::vector<int64_t>& prompt_lengths,
                             const std::vector<std::vector<int64_t>>& response_lengths);

  // Validates offsets given directly (e.g. from a trainer's tensors).
  static Layout from_offsets(std::vector<int32_t> cu_seqlens, std::vector<int32_t> cu_groups);

  // A tree: parents[s] in [-1, s) (-1: a root), lengths[s] >= 1, one entry each per segment in
  // packed order. int64 so that a value past the int32 range is reported, not wrapped.
  static Layout from_tree(const std::vector<int64_t>& parents, const std::vector<int64_t>& lengths);

  // A tree given by its offsets (cu_seqlens as in from_offsets) and parents: the operator's form.
  static Layout from_tree_offsets(std::vector<int32_t> cu_seqlens, std::vector<int32_t> parents);

  const std::vector<int32_t>& cu_seqlens() const { return cu_seqlens_; }
  // Per segment: its parent's index, or -1 for a root (every layout, two-level ones included).
  const std::vector<int32_t>& parents() const { return parents_; }
  // Two-level layouts only; empty for other trees.
  const std::vector<int32_t>& cu_groups() const { return cu_groups_; }
  bool is_two_level() const { return !cu_groups_.empty(); }

  int32_t num_groups() const { return is_two_level() ? static_cast<int32_t>(cu_groups_.size()) - 1 : 0; }
  int32_t num_segments() const { return static_cast<int32_t>(cu_seqlens_.size()) - 1; }
  int32_t total_tokens() const { return cu_seqlens_.back(); }

  int32_t segment_begin(int32_t s) const { return cu_seqlens_[s]; }
  int32_t segment_end(int32_t s) const { return cu_seqlens_[s + 1]; }
  int32_t segment_length(int32_t s) const { return cu_seqlens_[s + 1] - cu_seqlens_[s]; }
  int32_t parent(int32_t s) const { return parents_[s]; }
  // Position id of segment s's first token: the total length of its ancestors.
  int32_t position_begin(int32_t s) const { return position_begins_[s]; }
  // Segments on the longest root-to-leaf path (1: no segment has a parent).
  int32_t depth() const { return depth_; }
  int32_t prompt_segment(int32_t g) const { return cu_groups_[g]; }
  int32_t prompt_begin(int32_t g) const { return cu_seqlens_[cu_groups_[g]]; }
  int32_t prompt_end(int32_t g) const { return cu_seqlens_[cu_groups_[g] + 1]; }
  int32_t prompt_length(int32_t g) const { return prompt_end(g) - prompt_begin(g); }
  int32_t num_responses(int32_t g) const { return cu_groups_[g + 1] - cu_groups_[g] - 1; }
  int32_t group_end(int32_t g) const { return cu_seqlens_[cu_groups_[g + 1]]; }
  int32_t max_segment_length() const;

  // Query-key pairs the mask allows: per segment, its length times its ancestors' tokens plus
  // L(L+1)/2 (two-level: sum_g P_g(P_g+1)/2 + sum_i (R_i P_g + R_i(R_i+1)/2)).
  int64_t visible_pairs() const;
  // Tokens and pairs of the equivalent N-copy layout: every root-to-leaf path as its own sequence
  // (two-level: [prompt; response_i] per response).
  int64_t ncopy_tokens() const;
  int64_t ncopy_pairs() const;

 private:
  Layout(std::vector<int32_t> cu_seqlens, std::vector<int32_t> parents);
  friend detail::PlanCache& detail::plan_cache(const Layout& layout);

  std::vector<int32_t> cu_seqlens_;
  std::vector<int32_t> parents_;
  std::vector<int32_t> cu_groups_;        // empty unless two-level
  std::vector<int32_t> position_begins_;  // per segment
  int32_t depth_ = 1;
  std::shared_ptr<detail::PlanCache> plan_cache_;  // shared by copies: their offsets are equal
};

}  // namespace dualkv
