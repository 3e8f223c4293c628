// Plain description of a packed batch by its lengths, shared by the test oracles and the tests.
//
// It deliberately does not use dualkv::Layout: the oracles derive token positions from these
// lengths on their own, so a wrong offset computation in the library cannot leak into them.
#pragma once

#include <cstdint>
#include <vector>

namespace dualkv_test {

struct GroupLengths {
  int64_t prompt = 0;              // P_g
  std::vector<int64_t> responses;  // R_g,0 ... R_g,N-1
};

using BatchSpec = std::vector<GroupLengths>;

// Where one group lies in the packed token order.
struct GroupTokens {
  int64_t prompt_begin = 0;
  int64_t prompt_length = 0;
  std::vector<int64_t> response_begins;
  std::vector<int64_t> response_lengths;
};

// Token ranges of every group, walking the packed order [prompt | responses...] group by group.
inline std::vector<GroupTokens> packed_token_ranges(const BatchSpec& batch) {
  std::vector<GroupTokens> ranges;
  int64_t next = 0;
  for (const GroupLengths& group : batch) {
    GroupTokens tokens;
    tokens.prompt_begin = next;
    tokens.prompt_length = group.prompt;
    next += group.prompt;
    for (int64_t length : group.responses) {
      tokens.response_begins.push_back(next);
      tokens.response_lengths.push_back(length);
      next += length;
    }
    ranges.push_back(tokens);
  }
  return ranges;
}

inline int64_t packed_token_count(const BatchSpec& batch) {
  int64_t total = 0;
  for (const GroupLengths& group : batch) {
    total += group.prompt;
    for (int64_t length : group.responses) total += length;
  }
  return total;
}

}  // namespace dualkv_test
