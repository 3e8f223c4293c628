"""dualkv.recurrent on the CPU: the plan, the packed convolution and the gated delta rule with the
state hand-off, each against a per-row reference written here from the definitions: every
[prompt; response] row run alone from zeros, one token at a time, in float64."""

import sys

import pytest
import torch
import torch.nn.functional as F

import dualkv
from dualkv.recurrent import RecurrentPlan, causal_conv1d, gated_delta_rule, gated_delta_rule_reference
from dualkv.recurrent import fla_backend

# Several groups, ragged responses, 1-token responses, prompts of 1 and 2 tokens (shorter than a
# width-4 convolution's tail), a prompt longer than that.
PROMPTS = [5, 1, 2, 9]
RESPONSES = [[3, 1, 4], [2, 1], [1], [6, 2, 1]]
HEADS, KEY_DIM, VALUE_DIM, CHANNELS = 3, 4, 5, 6


def layout():
    return dualkv.Layout.from_lengths(PROMPTS, RESPONSES)


def ncopy_rows(lay):
    """Packed row indices of every [prompt; response] row, and for each, how many leading rows are the prompt."""
    rows, start = [], 0
    for prompt, group in zip(lay.prompt_lengths, lay.response_lengths):
        prompt_rows = list(range(start, start + prompt))
        start += prompt
        for length in group:
            rows.append((prompt_rows + list(range(start, start + length)), prompt))
            start += length
    return rows


def per_row(fn, inputs, lay):
    """fn on each N-copy row alone; packed-order result (a prompt's rows from its first row)."""
    out = [None] * lay.num_tokens
    for rows, _ in ncopy_rows(lay):
        result = fn(*(x[rows] for x in inputs))
        for i, r in enumerate(rows):
            if out[r] is None:
                out[r] = result[i]
    return torch.stack(out)


def conv_row(x, weight, bias):
    """x (L, C): out[t, c] = silu(bias + sum_j weight[c, j] x[t - (width-1) + j, c]), zeros before t = 0."""
    width = weight.shape[1]
    padded = torch.cat([x.new_zeros(width - 1, x.shape[1]), x])
    out = torch.stack([(padded[t : t + width].T * weight).sum(1) + bias for t in range(x.shape[0])])
    return F.silu(out)


def delta_rule_row(q, k, v, g, beta):
    """One sequence, one token at a time, from the zero state."""
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * q.shape[-1] ** -0.5
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    state = q.new_zeros(q.shape[1], q.shape[2], v.shape[2])
    out = []
    for t in range(q.shape[0]):
        for h in range(q.shape[1]):
            s = state[h] * torch.exp(g[t, h])
            s = s + beta[t, h] * torch.outer(k[t, h], v[t, h] - s.T @ k[t, h])
            state = torch.cat([state[:h], s[None], state[h + 1 :]])
        out.append(torch.einsum("hk,hkv->hv", q[t], state))
    return torch.stack(out)


def delta_inputs(tokens, generator, dtype=torch.float64):
    q, k = (torch.randn(tokens, HEADS, KEY_DIM, generator=generator, dtype=dtype) for _ in range(2))
    v = torch.randn(tokens, HEADS, VALUE_DIM, generator=generator, dtype=dtype)
    g = F.logsigmoid(torch.randn(tokens, HEADS, generator=generator, dtype=dtype))
    beta = torch.rand(tokens, HEADS, generator=generator, dtype=dtype)
    return [q, k, v, g, beta]


# --- the plan ---------------------------------------------------------------------------------
def test_shared_prompt_plan_runs_in_two_waves():
    lay = layout()
    plan = RecurrentPlan.from_layout(lay)
    assert plan.num_waves == 2
    prompts, responses = plan.waves
    assert prompts.state_source is None and prompts.produces_states and not responses.produces_states
    # Group 2's single response continues its prompt: one sequence of the first wave, no hand-off.
    assert prompts.cu_seqlens.diff().tolist() == [5, 1, 2 + 1, 9]
    assert responses.cu_seqlens.diff().tolist() == [3, 1, 4, 2, 1, 6, 2, 1]
    assert responses.state_source.tolist() == [0, 0, 0, 1, 1, 3, 3, 3]
    first_wave = torch.isin(lay.segment_ids, torch.tensor([0, 4, 7, 8, 9]))
    assert torch.equal(plan.order, torch.cat([first_wave.nonzero()[:, 0], (~first_wave).nonzero()[:, 0]]))
    assert torch.equal(plan.order[plan.inverse_order], torch.arange(lay.num_tokens))
    assert not plan.in_packed_order


def test_ncopy_rows_are_one_wave_in_packed_order():
    """A layout of one response per group (the N-copy rows): one varlen call over the rows."""
    lay = dualkv.Layout.from_lengths([5, 5, 2], [[3], [1], [4]])
    plan = RecurrentPlan.from_layout(lay)
    assert plan.num_waves == 1 and plan.in_packed_order
    assert plan.waves[0].cu_seqlens.tolist() == [0, 8, 14, 20]
    assert not plan.waves[0].produces_states


def test_conv_tails_read_the_path_and_zeros_before_the_root():
    # Tree: segment 0 (2 tokens) <- 1 (1 token, 0's only child: one run with it) <- 2 and 3 (two
    # children: runs of their own); 4 is a root of 1 token.
    plan = RecurrentPlan([0, 2, 3, 6, 7, 8], [-1, 0, 1, 1, -1])
    source, output_rows = plan.conv_tail_index(4)
    zero = 8
    expected = [zero, zero, zero, 0, 1, 2] + [0, 1, 2, 3, 4, 5] + [0, 1, 2, 6] + [zero, zero, zero, 7]
    assert source.tolist() == expected
    assert output_rows.tolist() == [0, 1, 2, 6, 7, 8, 12, 16]  # row t of run r: t + 3 r
    assert [w.num_sequences for w in plan.waves] == [2, 2]
    assert plan.waves[1].state_source.tolist() == [0, 0]  # both start from run 0's final state


@pytest.mark.parametrize(
    "cu_seqlens, parents, message",
    [
        ([0, 2, 4], [-1, 1], r"parents\[1\]: must be -1 or the index of an earlier segment"),
        ([0, 2, 4], [-1, -2], r"parents\[1\]"),
        ([0, 2, 4], [-1], "parents: expected one entry per segment"),
        ([0, 2, 2], [-1, 0], "every segment must hold at least one token"),
        ([1, 2], [-1], "starting at 0"),
    ],
)
def test_plan_validation_names_the_argument(cu_seqlens, parents, message):
    with pytest.raises(ValueError, match=message):
        RecurrentPlan(cu_seqlens, parents)


# --- the convolution -----------------------------------------------------------------------------
@pytest.mark.parametrize("width", [1, 2, 4, 7])
def test_packed_conv_equals_each_row_alone_forward_and_backward(width):
    lay = layout()
    generator = torch.Generator().manual_seed(width)
    x = torch.randn(CHANNELS, lay.num_tokens, generator=generator, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(CHANNELS, width, generator=generator, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(CHANNELS, generator=generator, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(lay.num_tokens, CHANNELS, generator=generator, dtype=torch.float64)

    out = causal_conv1d(x, weight, RecurrentPlan.from_layout(lay), bias=bias, activation=F.silu)
    packed_grads = torch.autograd.grad(out.T, (x, weight, bias), grad)
    # N-copy: every row alone; a prompt row's output (and upstream gradient) is its first copy's.
    expected = per_row(lambda rows: conv_row(rows, weight, bias), [x.T], lay)
    expected_grads = torch.autograd.grad(expected, (x, weight, bias), grad)
    torch.testing.assert_close(out.T, expected, rtol=1e-12, atol=1e-12)
    for got, want in zip(packed_grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_packed_conv_in_low_precision_computes_in_the_weights_dtype():
    lay = layout()
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(CHANNELS, lay.num_tokens, generator=generator).to(torch.bfloat16)
    weight = torch.randn(CHANNELS, 4, generator=generator)
    out = causal_conv1d(x, weight, RecurrentPlan.from_layout(lay), activation=F.silu)
    assert out.dtype == torch.bfloat16
    expected = per_row(lambda rows: conv_row(rows, weight, torch.zeros(CHANNELS)), [x.T.float()], lay)
    torch.testing.assert_close(out.T.float(), expected, rtol=1e-2, atol=1e-2)


# --- the recurrence --------------------------------------------------------------------------------
def test_reference_recurrence_equals_the_token_loop_and_carries_state_across_a_split():
    generator = torch.Generator().manual_seed(4)
    inputs = delta_inputs(9, generator)
    whole, final = gated_delta_rule_reference(*inputs, torch.tensor([0, 9]), output_final_state=True)
    torch.testing.assert_close(whole, delta_rule_row(*inputs), rtol=1e-12, atol=1e-12)
    head, state = gated_delta_rule_reference(*(x[:4] for x in inputs), torch.tensor([0, 4]), output_final_state=True)
    tail, final_again = gated_delta_rule_reference(
        *(x[4:] for x in inputs), torch.tensor([0, 5]), initial_state=state, output_final_state=True
    )
    torch.testing.assert_close(torch.cat([head, tail]), whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final_again, final, rtol=1e-12, atol=1e-12)


def test_packed_recurrence_equals_each_row_alone_forward_and_backward():
    lay = layout()
    generator = torch.Generator().manual_seed(5)
    leaves = [x.requires_grad_() for x in delta_inputs(lay.num_tokens, generator)]
    grad = torch.randn(lay.num_tokens, HEADS, VALUE_DIM, generator=generator, dtype=torch.float64)

    packed = gated_delta_rule(*(x.float() for x in leaves), RecurrentPlan.from_layout(lay))
    packed_grads = torch.autograd.grad(packed, leaves, grad.float())
    expected = per_row(delta_rule_row, leaves, lay)
    expected_grads = torch.autograd.grad(expected, leaves, grad)
    torch.testing.assert_close(packed.double(), expected, rtol=1e-5, atol=1e-5)
    for name, got, want in zip(("q", "k", "v", "g", "beta"), packed_grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)


def test_tree_plan_equals_each_root_to_leaf_path_alone():
    """A prefix tree (three waves; branching at a 1-token segment, so tails reach the grandparent):
    the plan is the whole description, the same convolution and recurrence run it."""
    lengths, parents = [3, 2, 1, 1, 4, 2], [-1, 0, 0, 1, 1, -1]
    offsets = torch.tensor([0, *lengths]).cumsum(0)
    plan = RecurrentPlan(offsets, parents)
    assert plan.num_waves == 3
    paths = []
    for leaf in (2, 3, 4, 5):
        chain, s = [], leaf
        while s >= 0:
            chain.insert(0, s)
            s = parents[s]
        paths.append(sum((list(range(int(offsets[s]), int(offsets[s + 1]))) for s in chain), []))

    def per_path(fn, inputs):
        out = [None] * int(offsets[-1])
        for rows in paths:
            result = fn(*(x[rows] for x in inputs))
            for i, r in enumerate(rows):
                out[r] = result[i] if out[r] is None else out[r]
        return torch.stack(out)

    generator = torch.Generator().manual_seed(8)
    leaves = [x.requires_grad_() for x in delta_inputs(int(offsets[-1]), generator)]
    grad = torch.randn(int(offsets[-1]), HEADS, VALUE_DIM, generator=generator, dtype=torch.float64)
    got = gated_delta_rule(*leaves, plan)
    want = per_path(delta_rule_row, leaves)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    for got_grad, want_grad in zip(torch.autograd.grad(got, leaves, grad), torch.autograd.grad(want, leaves, grad)):
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-10, atol=1e-10)
    x = torch.randn(CHANNELS, int(offsets[-1]), generator=generator, dtype=torch.float64)
    weight = torch.randn(CHANNELS, 4, generator=generator, dtype=torch.float64)
    conv = causal_conv1d(x, weight, plan, activation=F.silu)
    torch.testing.assert_close(conv.T, per_path(lambda rows: conv_row(rows, weight, torch.zeros(CHANNELS)), [x.T]))


def test_nan_in_one_segment_stays_in_its_own_rows():
    """NaN reaches what the N-copy rows reach: forward, the rows that see the segment; backward, the
    rows it sees too (a response's NaN gradient flows into its prompt's state, as in its N-copy row)."""
    lay = layout()
    generator = torch.Generator().manual_seed(6)
    clean = [x.float() for x in delta_inputs(lay.num_tokens, generator)]
    conv_in = torch.randn(CHANNELS, lay.num_tokens, generator=generator)
    weight = torch.randn(CHANNELS, 4, generator=generator)
    plan = RecurrentPlan.from_layout(lay)
    segments, groups = lay.segment_ids, lay.group_ids
    # Response 1 of group 0 (segment 2), then group 1's prompt (segment 4): the rows that see it,
    # the rows it sees.
    cases = ((2, segments == 2, (segments == 0) | (segments == 2)), (4, groups == 1, segments == 4))
    for poisoned, seen_by, sees in cases:
        rows = segments == poisoned
        dirty = [x.clone() for x in clean]
        for x in dirty:
            x[rows] = float("nan")
        leaves = [x.requires_grad_() for x in dirty]
        out = gated_delta_rule(*leaves, plan)
        out.backward(torch.ones_like(out))
        assert out[seen_by].isnan().all()
        assert torch.equal(out[~seen_by], gated_delta_rule(*clean, plan)[~seen_by])
        for leaf in leaves:
            assert leaf.grad[~(seen_by | sees)].isfinite().all()
        x = conv_in.clone()
        x[:, rows] = float("nan")
        conv = causal_conv1d(x, weight, plan)
        assert torch.equal(conv[:, ~seen_by], causal_conv1d(conv_in, weight, plan)[:, ~seen_by])
        assert conv[:, rows].isnan().all()


def test_backend_and_shape_errors_name_the_argument():
    lay = layout()
    plan = RecurrentPlan.from_layout(lay)
    inputs = [x.float() for x in delta_inputs(lay.num_tokens, torch.Generator().manual_seed(7))]
    with pytest.raises(ValueError, match="backend: 'fla' runs on CUDA tensors only"):
        gated_delta_rule(*inputs, plan, backend="fla")
    with pytest.raises(ValueError, match="backend: must be one of"):
        gated_delta_rule(*inputs, plan, backend="triton")
    with pytest.raises(ValueError, match="beta: expected"):
        gated_delta_rule(*inputs[:4], inputs[4][:, :1], plan)
    with pytest.raises(ValueError, match="q: 3 rows for a plan of"):
        gated_delta_rule(*(x[:3] for x in inputs), plan)
    with pytest.raises(ValueError, match="x: 3 rows for a plan of"):
        causal_conv1d(torch.zeros(CHANNELS, 3), torch.zeros(CHANNELS, 4), plan)
    with pytest.raises(ValueError, match="x.device: meta, but weight is on cpu"):
        causal_conv1d(torch.zeros(CHANNELS, lay.num_tokens, device="meta"), torch.zeros(CHANNELS, 4), plan)
    with pytest.raises(ValueError, match="initial_state: expected"):
        gated_delta_rule_reference(*inputs, torch.tensor([0, lay.num_tokens]), initial_state=torch.zeros(2, 1))


def test_missing_flash_linear_attention_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "fla", None)
    monkeypatch.setitem(sys.modules, "fla.ops", None)
    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", None)
    with pytest.raises(ImportError, match=r"need the package flash-linear-attention .*dualkv\[hybrid\]"):
        fla_backend._import_fla()


@pytest.mark.parametrize(
    "capability, triton, refused",
    [((9, 0), (3, 6, 0), True), ((9, 0), (3, 4, 0), True), ((9, 0), (3, 7, 1), False), ((9, 0), (3, 3, 1), False),
     ((8, 0), (3, 6, 0), False), ((10, 0), (3, 6, 0), False)],
)
def test_hopper_backward_needs_triton_3_7_1(monkeypatch, capability, triton, refused):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(fla_backend, "_triton_version", lambda: triton)
    if refused:
        with pytest.raises(RuntimeError, match=r"triton: .* needs triton >= 3\.7\.1"):
            fla_backend.check_triton_for_backward(torch.device("cuda"))
    else:
        fla_backend.check_triton_for_backward(torch.device("cuda"))
