// Token scores (include/dualkv/token_scores.h): host validation, then the backend of the
// logits' device. Order as in validate.cpp: each array's own rules, then the relations between
// arrays, then scalars, then overlaps of outputs with anything else.
#include "dualkv/token_scores.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dualkv/errors.h"
#include "host/backend.h"
#include "host/device_checks.h"

namespace dualkv {
namespace {

using detail::check_device;
using detail::device_name;

std::string num(int64_t value) { return std::to_string(value); }

// A byte range [begin, end) of caller memory, named for overlap errors.
struct ByteRange {
  std::string name;
  uintptr_t begin;
  uintptr_t end;
};

template <typename Pointer>
void check_rows(const std::string& name, const VocabRows<Pointer>& m) {
  check_device(name, m.device);
  // The CUDA kernels run one block per row.
  if (m.rows < 0 || INT32_MAX < m.rows) throw Error(name + ".rows", "must be in [0, 2^31), got " + num(m.rows));
  if (m.vocab < 1) throw Error(name + ".vocab", "must be >= 1, got " + num(m.vocab));
  if (m.rows > 1 && m.row_stride < m.vocab) {
    throw Error(name + ".row_stride", "must be >= vocab (" + num(m.vocab) + "), got " + num(m.row_stride));
  }
  if (m.rows > 0 && m.data == nullptr) throw Error(name, "data pointer must not be null");
}

template <typename Pointer>
ByteRange span(const std::string& name, const VocabRows<Pointer>& m) {
  const auto begin = reinterpret_cast<uintptr_t>(m.data);
  const int64_t elements = m.rows == 0 ? 0 : (m.rows - 1) * m.row_stride + m.vocab;
  return {name, begin, begin + static_cast<uintptr_t>(elements * dtype_size(m.dtype))};
}

template <typename Pointer>
void check_values(const std::string& name, const Values<Pointer>& v, int64_t count, const std::string& count_rule,
                  Device device) {
  if (v.count != count)
    throw Error(name + ".count", "must equal " + count_rule + " (" + num(count) + "), got " + num(v.count));
  check_device(name, v.device);
  if (v.device != device) {
    throw Error(name + ".device",
                "must match logits.device (" + device_name(device) + "), got " + device_name(v.device));
  }
  if (count > 0 && v.data == nullptr) throw Error(name, "data pointer must not be null");
}

template <typename Pointer>
ByteRange span(const std::string& name, const Values<Pointer>& v) {
  const auto begin = reinterpret_cast<uintptr_t>(v.data);
  return {name, begin, begin + static_cast<uintptr_t>(v.count) * sizeof(*v.data)};
}

void check_scalars(float inverse_temperature, const ExecutionOptions& options) {
  if (!std::isfinite(inverse_temperature) || inverse_temperature <= 0.0f) {
    throw Error("inverse_temperature", "must be finite and > 0, got " + std::to_string(inverse_temperature));
  }
  if (options.cpu_threads < 0) throw Error("options.cpu_threads", "must be >= 0 (0 = all cores)");
}

// Each output must not share a byte with any other range (inputs or outputs).
void check_no_overlap(const std::vector<ByteRange>& outputs, const std::vector<ByteRange>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ByteRange& out = outputs[i];
    std::vector<ByteRange> others(inputs);
    others.insert(others.end(), outputs.begin(), outputs.begin() + i);
    for (const ByteRange& other : others) {
      if (out.begin < out.end && other.begin < other.end && out.begin < other.end && other.begin < out.end) {
        throw Error(out.name, "must not overlap " + other.name + " (outputs are written while inputs are read)");
      }
    }
  }
}

void validate(const TokenScoresForwardParams& p) {
  check_rows("logits", p.logits);
  check_values("lse", p.lse, p.logits.rows, "logits.rows", p.logits.device);
  check_values("entropy", p.entropy, p.logits.rows, "logits.rows", p.logits.device);
  check_scalars(p.inverse_temperature, p.options);
  check_no_overlap({span("lse", p.lse), span("entropy", p.entropy)}, {span("logits", p.logits)});
}

void validate(const TokenScoresBackwardParams& p) {
  check_rows("logits", p.logits);
  check_rows("grad_logits", p.grad_logits);
  const Device device = p.logits.device;
  if (p.grad_logits.rows != p.logits.rows || p.grad_logits.vocab != p.logits.vocab) {
    throw Error("grad_logits", "must have logits' shape (" + num(p.logits.rows) + ", " + num(p.logits.vocab) +
                                   "), got (" + num(p.grad_logits.rows) + ", " + num(p.grad_logits.vocab) + ")");
  }
  if (p.grad_logits.dtype != p.logits.dtype) {
    throw Error("grad_logits.dtype", "must match logits.dtype (" + std::string(dtype_name(p.logits.dtype)) + "), got " +
                                         dtype_name(p.grad_logits.dtype));
  }
  if (p.grad_logits.device != device) {
    throw Error("grad_logits.device",
                "must match logits.device (" + device_name(device) + "), got " + device_name(p.grad_logits.device));
  }
  check_values("lse", p.lse, p.logits.rows, "logits.rows", device);
  check_values("entropy", p.entropy, p.logits.rows, "logits.rows", device);
  const TokenUses& u = p.uses;
  check_values("uses.offsets", u.offsets, p.logits.rows + 1, "logits.rows + 1", device);
  const int64_t uses = u.targets.count;
  check_values("uses.targets", u.targets, uses, "the number of uses", device);
  check_values("uses.grad_logprob", u.grad_logprob, uses, "uses.targets.count", device);
  check_values("uses.grad_entropy", u.grad_entropy, uses, "uses.targets.count", device);
  check_scalars(p.inverse_temperature, p.options);
  check_no_overlap({span("grad_logits", p.grad_logits)},
                   {span("logits", p.logits), span("lse", p.lse), span("entropy", p.entropy),
                    span("uses.offsets", u.offsets), span("uses.targets", u.targets),
                    span("uses.grad_logprob", u.grad_logprob), span("uses.grad_entropy", u.grad_entropy)});
}

}  // namespace

void token_scores_forward(const TokenScoresForwardParams& params) {
  validate(params);
  if (params.logits.rows == 0) return;
#ifdef DUALKV_WITH_CUDA
  if (params.logits.device.kind == DeviceKind::kCuda) return detail::cuda_token_scores_forward(params);
#endif
  detail::cpu_token_scores_forward(params);
}

void token_scores_backward(const TokenScoresBackwardParams& params) {
  validate(params);
  if (params.logits.rows == 0) return;
#ifdef DUALKV_WITH_CUDA
  if (params.logits.device.kind == DeviceKind::kCuda) return detail::cuda_token_scores_backward(params);
#endif
  detail::cpu_token_scores_backward(params);
}

}  // namespace dualkv
