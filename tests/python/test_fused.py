"""dualkv.training.fuse_elementwise: a tiny Qwen3 (and Qwen3-MoE) policy with fused RMSNorm, gated-MLP
and rotary-embedding layers gives the log-probs, entropies and parameter gradients of the eager model
(fp32, on the CPU) at two stream lengths without recompiling, also under activation checkpointing;
so do tiny Qwen3.5 and Qwen3-Next policies with their zero-centred RMSNorms and partial RoPE fused;
the fused RoPEs are transformers' apply_rotary_pos_emb and Qwen3.5's (fp32 and bf16); nothing
outside the model changes."""

import copy

import pytest
import torch
from torch._dynamo.utils import counters
from transformers.models.qwen3 import modeling_qwen3

import dualkv
from dualkv.training import PackedPolicy
from dualkv.training.fused import (
    _fused_apply_partial_rotary_pos_emb,
    _fused_apply_rotary_pos_emb,
    _fused_zero_centred_rms_norm_forward,
    fuse_elementwise,
)
from dualkv.training.models import build_model, model_config

PROMPTS = [[5, 9, 2, 7, 1, 3, 8], [4, 4]]
RESPONSES = [[[11, 12, 13], [14], [15, 16, 17, 18, 19]], [[20, 21], [22, 23, 24]]]
# A longer stream (54 tokens against 23), so that the second length must not recompile.
LONG_PROMPTS = [[(7 * i) % 500 + 1 for i in range(19)], [3, 1, 4, 1, 5]]
LONG_RESPONSES = [[[30 + i for i in range(9)], [60, 61], [70 + i for i in range(6)]], [[90 + i for i in range(13)]]]

# Per layer: input, post-attention, query and key norms, the attention's RoPE and (dense models)
# the MLP; then the final norm. Qwen3-MoE's sparse block is not a SiLU-gated MLP.
MODULES_PER_LAYER = {"tiny-qwen3": 6, "tiny-qwen3-moe": 5}


def _scores_and_grads(lm, batch):
    lm.zero_grad(set_to_none=True)
    logprobs, entropy = PackedPolicy(lm)(batch)
    (logprobs.sum() + 0.1 * (entropy * logprobs.detach()).sum()).backward()
    return (logprobs, entropy), {name: p.grad for name, p in lm.named_parameters()}


def _assert_same_scores_and_grads(fused, eager, batch):
    eager_scores, eager_grads = _scores_and_grads(eager, batch)
    fused_scores, fused_grads = _scores_and_grads(fused, batch)
    for a, b in zip(fused_scores, eager_scores):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert eager_grads.keys() == fused_grads.keys()
    for name, grad in eager_grads.items():
        assert grad is not None and torch.count_nonzero(grad) > 0, name
        torch.testing.assert_close(fused_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)


def _compiled_graphs() -> int:
    return counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-qwen3-moe"])
def test_fused_policy_equals_eager_policy(name):
    eager = build_model(name, seed=3)
    fused = copy.deepcopy(eager)
    layers = model_config(name).num_hidden_layers
    assert fuse_elementwise(fused) == MODULES_PER_LAYER[name] * layers + 1
    _assert_same_scores_and_grads(fused, eager, dualkv.pack(PROMPTS, RESPONSES))
    # Dynamic shapes: the longer stream reuses the compiled graphs.
    graphs = _compiled_graphs()
    long_batch = dualkv.pack(LONG_PROMPTS, LONG_RESPONSES)
    assert long_batch.input_ids.numel() > 2 * dualkv.pack(PROMPTS, RESPONSES).input_ids.numel()
    _assert_same_scores_and_grads(fused, eager, long_batch)
    assert _compiled_graphs() == graphs


@pytest.mark.parametrize("name", ["tiny-qwen3.5", "tiny-qwen3-next"])
def test_fused_hybrid_policy_equals_eager_policy(name):
    """Qwen3.5's and Qwen3-Next's zero-centred RMSNorm and partial RoPE are fused too (the Gated
    DeltaNet layers' gated norm is not an RMSNorm of either form and stays as it is)."""
    eager = build_model(name, seed=4)
    fused = copy.deepcopy(eager)
    routed = fuse_elementwise(fused)
    norms = [m for m in fused.modules() if type(m).__name__ in ("Qwen3_5RMSNorm", "Qwen3NextRMSNorm")]
    attentions = [m for m in fused.modules() if type(m).__name__ in ("Qwen3_5Attention", "Qwen3NextAttention")]
    config = model_config(name)
    assert len(norms) == 2 * config.num_hidden_layers + 1 + 2 * len(attentions) and attentions
    assert all(m.forward.__func__ is _fused_zero_centred_rms_norm_forward for m in norms)
    assert all(
        m.forward.__func__.__globals__["apply_rotary_pos_emb"] is _fused_apply_partial_rotary_pos_emb for m in attentions
    )
    assert routed >= len(norms) + len(attentions)
    assert fuse_elementwise(fused) == routed
    assert not any("forward" in m.__dict__ for m in eager.modules())
    _assert_same_scores_and_grads(fused, eager, dualkv.pack(PROMPTS, RESPONSES))


def _copies_of_heads(profiler, head_dim) -> list:
    """The operators that copied a tensor of heads: three or more dimensions, the last the head
    dimension (q, k, v and their gradients are (1, T, heads, d), (1, heads, T, d) or (heads, T, d))."""
    copying = ("aten::clone", "aten::copy_", "aten::select_backward")
    return [
        (e.name, shape)
        for e in profiler.events()
        if e.name in copying and len(shape := e.input_shapes[0]) >= 3 and shape[-1] == head_dim
    ]


def test_fused_policy_backward_copies_no_activation():
    """dualkv's attention integration and the fused RoPE hand q, k, v and their gradients on as views
    of the projections' outputs: the step's backward copied each of them once per layer before."""
    model = build_model("tiny-qwen3", seed=5)
    fuse_elementwise(model)
    batch = dualkv.pack(PROMPTS, RESPONSES)
    _scores_and_grads(model, batch)  # compiles and runs dualkv's first-use self-check outside the count
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profiler:
        _scores_and_grads(model, batch)
    assert _copies_of_heads(profiler, model.config.head_dim) == []


def test_fused_policy_under_activation_checkpointing_equals_eager_policy():
    eager = build_model("tiny-qwen3", seed=6).train()
    fused = copy.deepcopy(eager)
    fuse_elementwise(fused)
    # The fused layers are recomputed in backward (the compiled functions run again on the
    # recomputed activations). Only the fused model checkpoints: the eager one runs first, outside
    # checkpointing, so dualkv's first-use self-check (which runs a backward) does not run inside
    # a checkpointed forward.
    fused.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    _assert_same_scores_and_grads(fused, eager, dualkv.pack(PROMPTS, RESPONSES))


def _rope_inputs(tokens, dtype, generator, head_dim=64):
    """q (1, 4, T, d) and k (1, 2, T, d) as the (1, H, T, d) transposes of (1, T, H, d) tensors, as
    Qwen3's attention makes them, and Qwen3's rotary cos and sin (1, T, d) in their dtype."""

    def heads(count):
        x = torch.randn(1, tokens, count, head_dim, generator=generator, dtype=torch.float64)
        return x.to(dtype).transpose(1, 2).requires_grad_()

    frequencies = torch.logspace(0, -4, head_dim // 2, dtype=torch.float64)
    angles = torch.arange(tokens, dtype=torch.float64)[None, :, None] * frequencies
    angles = torch.cat((angles, angles), dim=-1)
    return heads(4), heads(2), angles.cos().to(dtype), angles.sin().to(dtype)


def _rope_results(fused_rope, eager_rope, q, k, cos, sin, generator):
    """Each RoPE's (q, k) and the gradients of the inputs q and k under one random output gradient:
    (fused, its gradients), (eager, its gradients)."""
    results = [rope(q, k, cos, sin) for rope in (fused_rope, eager_rope)]
    grads = [torch.randn(x.shape, generator=generator).to(x.dtype) for x in results[1]]
    return [(out, torch.autograd.grad(out, (q, k), grads)) for out in results]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_rope_is_transformers_rope(dtype, generator):
    eager_rope = modeling_qwen3.apply_rotary_pos_emb
    graphs = None
    for tokens in (37, 101, 250):
        q, k, cos, sin = _rope_inputs(tokens, dtype, generator)
        (got, got_grads), (expected, expected_grads) = _rope_results(
            _fused_apply_rotary_pos_emb, eager_rope, q, k, cos, sin, generator
        )
        for a, b in zip(got, expected):
            assert a.dtype == b.dtype == dtype and a.shape == b.shape
        if dtype == torch.float32:
            for a, b in zip((*got, *got_grads), (*expected, *expected_grads)):
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
        else:
            # Eager rounds each product to bf16, the fused form only its result: it is as close to
            # the exact (fp64) values as eager, within a bf16 rounding of the inputs' magnitude (~4).
            exact = eager_rope(*(x.detach().double() for x in (q, k, cos, sin)))
            for a, b, c in zip(got, expected, exact):
                torch.testing.assert_close(a, b, rtol=1.6e-2, atol=4 * 2**-8)
                assert (a.double() - c).abs().max() <= (b.double() - c).abs().max()
            for a, b in zip(got_grads, expected_grads):
                torch.testing.assert_close(a, b, rtol=1.6e-2, atol=4 * 2**-8)
        if graphs is None:
            graphs = _compiled_graphs()  # compiled for the first length only
        assert _compiled_graphs() == graphs, tokens


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_partial_rope_is_qwen35_rope(dtype, generator):
    """Qwen3.5 rotates the first quarter of each head's features (cos and sin are that wide) and
    passes the rest through."""
    from transformers.models.qwen3_5 import modeling_qwen3_5

    eager_rope = modeling_qwen3_5.apply_rotary_pos_emb
    for tokens in (37, 101):
        q, k, _, _ = _rope_inputs(tokens, dtype, generator)
        _, _, cos, sin = _rope_inputs(tokens, dtype, generator, head_dim=16)
        (got, got_grads), (expected, expected_grads) = _rope_results(
            _fused_apply_partial_rotary_pos_emb, eager_rope, q, k, cos, sin, generator
        )
        for a, b in zip(got, expected):
            assert a.dtype == b.dtype == dtype and a.shape == b.shape
            # The passed-through features are the inputs' own values, in any precision.
            assert torch.equal(a[..., 16:], b[..., 16:])
        tolerance = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=4 * 2**-8)
        for a, b in zip((*got, *got_grads), (*expected, *expected_grads)):
            torch.testing.assert_close(a, b, **tolerance)


def test_only_token_dimensions_are_symbolic(generator):
    """A new stream length reuses each compiled function; a new feature or head dimension compiles
    anew, so the kernels index with constant head and feature sizes (with every dimension symbolic,
    Inductor's RoPE divided by the runtime head dimension and ran at a quarter of its speed)."""
    norm = modeling_qwen3.Qwen3RMSNorm(16)
    wide_norm = modeling_qwen3.Qwen3RMSNorm(24)
    mlp = build_model("tiny-qwen3", seed=4).model.layers[0].mlp
    assert fuse_elementwise(torch.nn.ModuleList([norm, wide_norm, mlp])) == 3
    hidden = mlp.gate_proj.in_features

    def run_all(tokens, head_dim):
        norm(torch.randn(1, tokens, 16, generator=generator))
        mlp(torch.randn(1, tokens, hidden, generator=generator))
        q, k, cos, sin = _rope_inputs(tokens, torch.float32, generator, head_dim)
        _fused_apply_rotary_pos_emb(q, k, cos, sin)

    run_all(29, 64)
    graphs = _compiled_graphs()
    run_all(83, 64)
    assert _compiled_graphs() == graphs
    wide_norm(torch.randn(1, 83, 24, generator=generator))
    assert _compiled_graphs() == graphs + 1
    q, k, cos, sin = _rope_inputs(83, torch.float32, generator, 32)
    _fused_apply_rotary_pos_emb(q, k, cos, sin)
    assert _compiled_graphs() == graphs + 2


def test_rope_fusion_is_per_model_and_idempotent():
    eager_rope = modeling_qwen3.apply_rotary_pos_emb
    model = build_model("tiny-qwen3", seed=4)
    other = build_model("tiny-qwen3", seed=4)
    count = fuse_elementwise(model)
    attentions = [layer.self_attn for layer in model.model.layers]
    forwards = [attention.forward for attention in attentions]
    assert all("forward" in a.__dict__ for a in attentions)  # bound on the instances,
    assert forwards[0].__func__ is not type(attentions[0]).forward  # not the class's forward
    assert all(f.__self__ is a and f.__func__ is forwards[0].__func__ for f, a in zip(forwards, attentions))
    assert fuse_elementwise(model) == count
    assert [a.forward for a in attentions] == forwards
    # transformers' module and other models of the class keep the eager RoPE.
    assert modeling_qwen3.apply_rotary_pos_emb is eager_rope
    assert all("forward" not in layer.self_attn.__dict__ for layer in other.model.layers)
    clone = copy.deepcopy(model)
    clone_attention = clone.model.layers[0].self_attn
    assert clone_attention.forward.__self__ is clone_attention
    assert clone_attention.forward.__func__ is forwards[0].__func__


def test_an_attention_forward_replaced_by_something_else_is_left_alone():
    model = build_model("tiny-qwen3", seed=4)
    attention = model.model.layers[0].self_attn
    replaced = attention.forward = lambda *args, **kwargs: None
    layers = model_config("tiny-qwen3").num_hidden_layers
    assert fuse_elementwise(model) == 6 * layers + 1 - 1
    assert attention.forward is replaced


def apply_rotary_pos_emb(q, k, cos, sin):
    """Interleaved RoPE: a different function under transformers' name."""
    rotated_q = torch.stack((-q[..., 1::2], q[..., ::2]), dim=-1).flatten(-2)
    rotated_k = torch.stack((-k[..., 1::2], k[..., ::2]), dim=-1).flatten(-2)
    return q * cos + rotated_q * sin, k * cos + rotated_k * sin


class _OtherRopeAttention(torch.nn.Module):
    def forward(self, q, k, cos, sin):
        return apply_rotary_pos_emb(q, k, cos, sin)


def test_a_deep_copy_of_a_fused_model_runs_on_its_own_weights():
    model = build_model("tiny-qwen3", seed=4)
    fuse_elementwise(model)
    clone = copy.deepcopy(model)
    norm, clone_norm = model.model.norm, clone.model.norm
    assert clone_norm.forward.__self__ is clone_norm
    with torch.no_grad():
        clone_norm.weight.mul_(2)
        x = torch.randn(3, norm.weight.numel())
        torch.testing.assert_close(clone_norm(x), 2 * norm(x))


def test_modules_that_are_not_rms_norms_silu_mlps_or_transformers_rope_attention_are_left_alone():
    class GeluMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = self.up_proj = self.down_proj = torch.nn.Linear(4, 4)
            self.act_fn = torch.nn.GELU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    model = torch.nn.Sequential(GeluMLP(), torch.nn.LayerNorm(4), _OtherRopeAttention())
    forwards = [m.forward for m in model]
    assert fuse_elementwise(model) == 0
    assert [m.forward for m in model] == forwards
