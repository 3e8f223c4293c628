// Host validation. Order: each tensor's own rules, then the relations between
// tensors, then scalars, then memory overlap of outputs. Every violation names its argument.
// Shapes come before data pointers and the softmax scale because an empty tensor has a null
// pointer and a head_dim of 0 makes the default scale infinite: the shape is what the caller got
// wrong, so it is what the error names.
#include "host/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dualkv/errors.h"
#include "host/device_checks.h"

namespace dualkv::detail {
namespace {

constexpr int64_t kMaxHeadDim = 256;

std::string field(const std::string& tensor, const char* member) { return tensor + "." + member; }
std::string num(int64_t value) { return std::to_string(value); }

void check_scale(float softmax_scale) {
  if (!std::isfinite(softmax_scale) || softmax_scale <= 0.0f) {
    throw Error("softmax_scale", "must be finite and > 0, got " + std::to_string(softmax_scale));
  }
}

void check_options(const ExecutionOptions& options, Device device) {
  if (options.cpu_threads < 0) throw Error("options.cpu_threads", "must be >= 0 (0 = all cores)");
  if (device.kind == DeviceKind::kCuda && options.accumulation == Accumulation::kFloat64) {
    throw Error("options.accumulation", "fp64 accumulation is CPU-only");
  }
}

// A strided extent (stride, count) of one dimension, in elements.
struct Extent {
  int64_t stride;
  int64_t count;
  const char* stride_name;
};

// A view's elements must stay addressable: its span in bytes may not pass kMaxSpanBytes.
constexpr int64_t kMaxSpanBytes = int64_t{1} << 48;

// The span (elements) of the dimensions inside `e` and `e` itself; throws naming e's stride when
// it would pass kMaxSpanBytes (or overflow int64 on the way).
int64_t extend_span(const std::string& name, const Extent& e, int64_t inner_span) {
  int64_t reach = 0;
  if (__builtin_mul_overflow(e.stride, e.count - 1, &reach) || __builtin_add_overflow(reach, inner_span, &reach) ||
      reach > kMaxSpanBytes / 4) {
    throw Error(field(name, e.stride_name),
                "view spans more than 2^48 bytes: stride " + num(e.stride) + " over " + num(e.count) + " entries");
  }
  return reach;
}

// The view must not overlap itself: sorted by stride, each stride reaches past the span of the
// dimensions inside it. Dimensions of extent 1 have no meaningful stride and are skipped.
void check_strides(const std::string& name, std::vector<Extent> extents) {
  extents.erase(std::remove_if(extents.begin(), extents.end(), [](const Extent& e) { return e.count <= 1; }),
                extents.end());
  for (const Extent& e : extents) {
    if (e.stride < 1) throw Error(field(name, e.stride_name), "must be >= 1, got " + num(e.stride));
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.stride < b.stride; });
  int64_t inner_span = 1;
  for (const Extent& e : extents) {
    if (e.stride < inner_span) {
      throw Error(field(name, e.stride_name), "view would overlap itself: stride " + num(e.stride) +
                                                  " is shorter than the " + num(inner_span) +
                                                  " elements of the dimensions inside it");
    }
    inner_span = extend_span(name, e, inner_span);
  }
}

// What the rules compare against for one (tokens, heads, head_dim) tensor.
struct Expected {
  int64_t tokens;
  int64_t heads;  // 0: not fixed (q and k set them)
  int64_t head_dim;
  DType dtype;
  Device device;
  const char* like;  // which tensor fixed heads/dtype/device, for messages
};

template <typename Pointer>
void check_tensor(const std::string& name, const TokenHeadTensor<Pointer>& t, const Expected& e) {
  if (t.tokens != e.tokens) {
    throw Error(field(name, "tokens"),
                "must equal the layout's total_tokens (" + num(e.tokens) + "), got " + num(t.tokens));
  }
  if (t.heads < 1) throw Error(field(name, "heads"), "must be >= 1, got " + num(t.heads));
  if (e.heads != 0 && t.heads != e.heads) {
    throw Error(field(name, "heads"),
                "must equal " + std::string(e.like) + ".heads (" + num(e.heads) + "), got " + num(t.heads));
  }
  if (t.head_dim < 1 || t.head_dim > kMaxHeadDim) {
    throw Error(field(name, "head_dim"), "must be in [1, " + num(kMaxHeadDim) + "], got " + num(t.head_dim));
  }
  if (e.head_dim != 0 && t.head_dim != e.head_dim) {
    throw Error(field(name, "head_dim"), "must equal q.head_dim (" + num(e.head_dim) + "), got " + num(t.head_dim));
  }
  if (t.dtype != e.dtype) {
    throw Error(field(name, "dtype"),
                "must match q.dtype (" + std::string(dtype_name(e.dtype)) + "), got " + dtype_name(t.dtype));
  }
  if (t.device != e.device) {
    throw Error(field(name, "device"),
                "must match q.device (" + device_name(e.device) + "), got " + device_name(t.device));
  }
  if (t.data == nullptr) throw Error(name, "data pointer must not be null");
  check_strides(name, {{t.token_stride, t.tokens, "token_stride"},
                       {t.head_stride, t.heads, "head_stride"},
                       {1, t.head_dim, "head_dim"}});
}

template <typename Pointer>
void check_lse(const std::string& name, const LseTensor<Pointer>& lse, int64_t tokens, int64_t heads, Device device) {
  if (lse.tokens != tokens) {
    throw Error(field(name, "tokens"),
                "must equal the layout's total_tokens (" + num(tokens) + "), got " + num(lse.tokens));
  }
  if (lse.heads != heads)
    throw Error(field(name, "heads"), "must equal q.heads (" + num(heads) + "), got " + num(lse.heads));
  if (lse.device != device) {
    throw Error(field(name, "device"),
                "must match q.device (" + device_name(device) + "), got " + device_name(lse.device));
  }
  if (lse.data == nullptr) throw Error(name, "data pointer must not be null");
  if (heads > 1 && lse.head_stride < tokens) {
    throw Error(field(name, "head_stride"), "must be >= lse.tokens (" + num(tokens) + "), got " + num(lse.head_stride));
  }
  extend_span(name, {lse.head_stride, heads, "head_stride"}, tokens);
}

// Memory of one tensor as rows of bytes: `rows` rows `row_stride` apart, each covering
// [0, row_span) from its start. Exact enough to accept fused-buffer slices (q/k/v or dq/dk/dv
// interleaved in one allocation) and to reject any real overlap.
struct Footprint {
  std::string name;
  uintptr_t base;
  int64_t row_stride;
  int64_t rows;
  int64_t row_span;

  uintptr_t end() const { return base + static_cast<uintptr_t>(row_stride * (rows - 1) + row_span); }
};

template <typename Pointer>
Footprint footprint(const std::string& name, const TokenHeadTensor<Pointer>& t) {
  const int64_t size = dtype_size(t.dtype);
  const bool token_major = t.tokens <= 1 || t.token_stride >= t.head_stride;
  const int64_t outer_stride = token_major ? t.token_stride : t.head_stride;
  const int64_t outer_count = token_major ? t.tokens : t.heads;
  const int64_t inner_stride = token_major ? t.head_stride : t.token_stride;
  const int64_t inner_count = token_major ? t.heads : t.tokens;
  return {name, reinterpret_cast<uintptr_t>(t.data), outer_stride * size, outer_count,
          (inner_stride * (inner_count - 1) + t.head_dim) * size};
}

template <typename Pointer>
Footprint footprint(const std::string& name, const LseTensor<Pointer>& lse) {
  return {name, reinterpret_cast<uintptr_t>(lse.data), lse.head_stride * 4, lse.heads, lse.tokens * 4};
}

bool overlap(const Footprint& a, const Footprint& b) {
  if (a.end() <= b.base || b.end() <= a.base) return false;
  const bool periodic = a.row_stride == b.row_stride && a.row_stride > 0 && a.row_span <= a.row_stride &&
                        b.row_span <= b.row_stride && (a.rows > 1 || b.rows > 1);
  if (!periodic) return true;
  // Same row period: disjoint iff the two rows' byte intervals never meet modulo the period.
  const Footprint& lo = a.base <= b.base ? a : b;
  const Footprint& hi = a.base <= b.base ? b : a;
  const int64_t shift = static_cast<int64_t>(hi.base - lo.base) % lo.row_stride;
  return !(shift >= lo.row_span && shift + hi.row_span <= lo.row_stride);
}

void check_no_overlap(const std::vector<Footprint>& outputs, const std::vector<Footprint>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const Footprint& input : inputs) {
      if (overlap(outputs[i], input)) {
        throw Error(outputs[i].name, "memory must not overlap input " + input.name + " (inputs are never modified)");
      }
    }
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (overlap(outputs[i], outputs[j])) {
        throw Error(outputs[j].name, "memory must not overlap output " + outputs[i].name);
      }
    }
  }
}

// The rules q, k and v share in both directions; returns what an output like q must match.
struct QkvShape {
  Expected like_q;
  Expected like_k;
};

QkvShape check_qkv(const Layout& layout, const InputTensor& q, const InputTensor& k, const InputTensor& v) {
  const int64_t tokens = layout.total_tokens();
  check_device("q", q.device);
  check_tensor("q", q, {tokens, 0, 0, q.dtype, q.device, "q"});
  check_tensor("k", k, {tokens, 0, q.head_dim, q.dtype, q.device, "q"});
  if (q.heads % k.heads != 0) {
    throw Error("q.heads", "must be a multiple of k.heads (" + num(k.heads) + ") for grouped-query attention, got " +
                               num(q.heads));
  }
  const Expected like_k{tokens, k.heads, q.head_dim, q.dtype, q.device, "k"};
  check_tensor("v", v, like_k);
  return {{tokens, q.heads, q.head_dim, q.dtype, q.device, "q"}, like_k};
}

}  // namespace

void validate_forward(const Layout& layout, const ForwardParams& p) {
  const QkvShape shape = check_qkv(layout, p.q, p.k, p.v);
  check_tensor("out", p.out, shape.like_q);
  check_lse("lse", p.lse, layout.total_tokens(), p.q.heads, p.q.device);
  check_scale(p.softmax_scale);
  check_options(p.options, p.q.device);
  check_no_overlap({footprint("out", p.out), footprint("lse", p.lse)},
                   {footprint("q", p.q), footprint("k", p.k), footprint("v", p.v)});
}

void validate_backward(const Layout& layout, const BackwardParams& p) {
  const QkvShape shape = check_qkv(layout, p.q, p.k, p.v);
  check_tensor("out", p.out, shape.like_q);
  check_tensor("dout", p.dout, shape.like_q);
  check_lse("lse", p.lse, layout.total_tokens(), p.q.heads, p.q.device);
  check_tensor("dq", p.dq, shape.like_q);
  check_tensor("dk", p.dk, shape.like_k);
  check_tensor("dv", p.dv, shape.like_k);
  check_scale(p.softmax_scale);
  check_options(p.options, p.q.device);
  check_no_overlap({footprint("dq", p.dq), footprint("dk", p.dk), footprint("dv", p.dv)},
                   {footprint("q", p.q), footprint("k", p.k), footprint("v", p.v), footprint("out", p.out),
                    footprint("dout", p.dout), footprint("lse", p.lse)});
}

}  // namespace dualkv::detail
