#include "cpu/attention_problem.h"

#include <cmath>
#include <cstring>

namespace dualkv_test {
namespace {

// Softmax scale as a multiple of the usual 1/sqrt(d): uniform inputs give scores of standard
// deviation ~1/3 at the usual scale, an almost flat softmax; sharper scores make the row max and
// its rescaling matter, which is where streaming-softmax bugs hide.
constexpr float kScoreSharpness = 4.0f;

// Gaps of kPadded views, prime so that no stride lands on a power of two by accident.
constexpr int64_t kHeadPadding = 3;
constexpr int64_t kTokenPadding = 5;
constexpr int64_t kLsePadding = 7;

// One tensor per entry of `heads`, laid out per `kind`; kFusedQkv puts them all in one buffer.
std::vector<StridedTensor> make_views(ViewKind kind, dualkv::DType dtype, int64_t tokens,
                                      const std::vector<int64_t>& heads, int64_t head_dim) {
  std::vector<StridedTensor> views;
  if (kind == ViewKind::kFusedQkv) {
    int64_t row = 0;
    for (int64_t h : heads) row += h;
    auto storage = std::make_shared<Storage>(dtype, tokens * row * head_dim);
    int64_t first_head = 0;
    for (int64_t h : heads) {
      views.push_back(StridedTensor{storage, first_head * head_dim, tokens, h, head_dim, row * head_dim, head_dim});
      first_head += h;
    }
    return views;
  }
  for (int64_t h : heads) {
    StridedTensor view;
    switch (kind) {
      case ViewKind::kHeadMajor:
        view = StridedTensor{nullptr, 0, tokens, h, head_dim, head_dim, tokens * head_dim};
        break;
      case ViewKind::kPadded: {
        const int64_t head_stride = head_dim + kHeadPadding;
        view = StridedTensor{nullptr, 0, tokens, h, head_dim, h * head_stride + kTokenPadding, head_stride};
        break;
      }
      default:
        view = StridedTensor{nullptr, 0, tokens, h, head_dim, h * head_dim, head_dim};
        break;
    }
    // Exactly up to the last element the view addresses.
    const int64_t elements = (tokens - 1) * view.token_stride + (h - 1) * view.head_stride + head_dim;
    view.storage = std::make_shared<Storage>(dtype, elements);
    views.push_back(view);
  }
  return views;
}

dualkv::ExecutionOptions options_for(dualkv::Accumulation accumulation) {
  dualkv::ExecutionOptions options;
  options.accumulation = accumulation;
  return options;
}

void append_unique(std::vector<const Storage*>& storages, const StridedTensor& tensor) {
  for (const Storage* seen : storages) {
    if (seen == tensor.storage.get()) return;
  }
  storages.push_back(tensor.storage.get());
}

}  // namespace

const char* view_kind_name(ViewKind kind) {
  switch (kind) {
    case ViewKind::kContiguous:
      return "contiguous";
    case ViewKind::kFusedQkv:
      return "fused_qkv";
    case ViewKind::kHeadMajor:
      return "head_major";
    case ViewKind::kPadded:
      return "padded";
  }
  return "unknown";
}

namespace {

int64_t tokens_of(const ProblemShape& shape) {
  return shape.tree.lengths.empty() ? packed_token_count(shape.batch) : tree_token_count(shape.tree);
}

dualkv::Layout layout_of(const ProblemShape& shape) {
  if (shape.tree.lengths.empty()) return make_layout(shape.batch);
  return dualkv::Layout::from_tree(shape.tree.parents, shape.tree.lengths);
}

}  // namespace

AttentionProblem::AttentionProblem(const ProblemShape& shape, std::mt19937_64& rng)
    : lse(shape.heads, tokens_of(shape), tokens_of(shape) + (shape.views == ViewKind::kPadded ? kLsePadding : 0)),
      shape_(shape),
      layout_(layout_of(shape)) {
  const int64_t tokens = layout_.total_tokens();
  const std::vector<int64_t> qkv_heads = {shape.heads, shape.kv_heads, shape.kv_heads};
  std::vector<StridedTensor> inputs = make_views(shape.views, shape.dtype, tokens, qkv_heads, shape.head_dim);
  q = inputs[0];
  k = inputs[1];
  v = inputs[2];
  dout = make_views(shape.views, shape.dtype, tokens, {shape.heads}, shape.head_dim)[0];
  out = make_views(shape.views, shape.dtype, tokens, {shape.heads}, shape.head_dim)[0];
  std::vector<StridedTensor> grads = make_views(shape.views, shape.dtype, tokens, qkv_heads, shape.head_dim);
  dq = grads[0];
  dk = grads[1];
  dv = grads[2];

  // Padding inside input buffers is poisoned too: reading it would turn results into NaN.
  for (StridedTensor* input : {&q, &k, &v, &dout}) input->storage->poison();
  for (StridedTensor* input : {&q, &k, &v, &dout}) fill_uniform(*input, rng);
  poison_outputs();
  softmax_scale = kScoreSharpness * dualkv::default_softmax_scale(static_cast<int64_t>(shape.head_dim));
}

dualkv::ForwardParams AttentionProblem::forward_params(dualkv::Accumulation accumulation) {
  dualkv::ForwardParams params;
  params.q = q.input();
  params.k = k.input();
  params.v = v.input();
  params.out = out.output();
  params.lse = lse.output();
  params.softmax_scale = softmax_scale;
  params.options = options_for(accumulation);
  return params;
}

dualkv::BackwardParams AttentionProblem::backward_params(dualkv::Accumulation accumulation) {
  dualkv::BackwardParams params;
  params.dout = dout.input();
  params.q = q.input();
  params.k = k.input();
  params.v = v.input();
  params.out = out.input();
  params.lse = lse.input();
  params.dq = dq.output();
  params.dk = dk.output();
  params.dv = dv.output();
  params.softmax_scale = softmax_scale;
  params.options = options_for(accumulation);
  return params;
}

void AttentionProblem::poison_outputs() {
  for (StridedTensor* output : {&out, &dq, &dk, &dv}) output->storage->poison();
  lse.poison();
}

std::vector<std::vector<unsigned char>> AttentionProblem::snapshot_forward_inputs() const {
  std::vector<const Storage*> storages;
  for (const StridedTensor* input : {&q, &k, &v, &dout}) append_unique(storages, *input);
  std::vector<std::vector<unsigned char>> bytes;
  for (const Storage* storage : storages) bytes.push_back(storage->bytes());
  return bytes;
}

std::vector<std::vector<unsigned char>> AttentionProblem::snapshot_backward_inputs() const {
  std::vector<std::vector<unsigned char>> bytes = snapshot_forward_inputs();
  bytes.push_back(out.storage->bytes());
  std::vector<unsigned char> lse_bytes(lse.values.size() * sizeof(float));
  std::memcpy(lse_bytes.data(), lse.values.data(), lse_bytes.size());
  bytes.push_back(lse_bytes);
  return bytes;
}

int64_t AttentionProblem::count_written_outside_outputs() const {
  const std::vector<const StridedTensor*> outputs = {&out, &dq, &dk, &dv};
  std::vector<const Storage*> storages;
  for (const StridedTensor* output : outputs) append_unique(storages, *output);
  int64_t written = lse.count_padding_written();
  for (const Storage* storage : storages) {
    std::vector<const StridedTensor*> views_in_storage;
    for (const StridedTensor* output : outputs) {
      if (output->storage.get() == storage) views_in_storage.push_back(output);
    }
    written += count_written_outside(*storage, views_in_storage);
  }
  return written;
}

}  // namespace dualkv_test
