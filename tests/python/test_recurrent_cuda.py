"""dualkv.recurrent on CUDA: the state hand-off on flash-linear-attention's kernels, the packed
convolution, and the errors that stand in for what cannot run.

Hand-off: packed (all prompts in one varlen call, all responses in one from their prompt's final
state) and the N-copy computation (every [prompt; response] row alone, one varlen call of the same
kernels), both against the N-copy rows in float64 on the CPU through dualkv's PyTorch recurrence
(which test_recurrent.py holds to the token-by-token definition). The packed error must be at most
twice the N-copy error plus a floor (the repository's low-precision rule; fp32 runs TF32 in the
kernels), for the output and the gradients of q, k, v, g and beta.
"""

import sys

import pytest
import torch
import torch.nn.functional as F
from models_support import hybrid_cuda_unavailable
from test_recurrent import conv_row, per_row

import dualkv
from dualkv.recurrent import RecurrentPlan, causal_conv1d, fla_backend, gated_delta_rule

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")

UNAVAILABLE = hybrid_cuda_unavailable() if torch.cuda.is_available() else "no GPU"
# Chunk (64-token) edges inside prompts and responses, R = 1, P = 1 and 2, several groups.
PROMPTS = [70, 1, 2, 130]
RESPONSES = [[33, 1, 64, 90], [5, 2], [1], [129, 7, 1]]
HEADS, KEY_DIM, VALUE_DIM = 4, 64, 64
ERROR_RATIO = 2.0
FLOOR = {torch.float32: 1e-4, torch.bfloat16: 1e-3}


def _inputs(tokens, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(tokens, HEADS, KEY_DIM, generator=gen, dtype=torch.float64) for _ in range(2))
    v = torch.randn(tokens, HEADS, VALUE_DIM, generator=gen, dtype=torch.float64)
    g = F.logsigmoid(torch.randn(tokens, HEADS, generator=gen, dtype=torch.float64) + 3)  # slow decay
    beta = torch.rand(tokens, HEADS, generator=gen, dtype=torch.float64)
    return [q, k, v, g, beta], torch.randn(tokens, HEADS, VALUE_DIM, generator=gen, dtype=torch.float64)


def _relative(got, want):
    return float((got.double().cpu() - want).norm() / want.norm())


def _ncopy_plan(layout, device):
    """Every [prompt; response] row as a root segment: the N-copy computation on the same kernels."""
    lengths = [p + r for p, group in zip(layout.prompt_lengths, layout.response_lengths) for r in group]
    return RecurrentPlan(torch.tensor([0, *lengths]).cumsum(0), [-1] * len(lengths), device)


def _ncopy_index(layout):
    """Packed rows of the N-copy stream, and where each packed row's result sits in it (its first copy)."""
    rows, first = [], {}
    start = 0
    for prompt, group in zip(layout.prompt_lengths, layout.response_lengths):
        prompt_rows = list(range(start, start + prompt))
        start += prompt
        for length in group:
            for row in prompt_rows + list(range(start, start + length)):
                first.setdefault(row, len(rows))
                rows.append(row)
            start += length
    return torch.tensor(rows), torch.tensor([first[r] for r in range(layout.num_tokens)])


@pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fla_handoff_is_as_accurate_as_the_ncopy_rows(dtype):
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    inputs, out_grad = _inputs(layout.num_tokens)
    rows, first = _ncopy_index(layout)

    def run(device, dtype, backend, plan, rows=None, first=None):
        leaves = [x.to(device, dtype, copy=True).requires_grad_() for x in inputs]
        stream = leaves if rows is None else [x[rows.to(device)] for x in leaves]
        out = gated_delta_rule(*stream, plan, backend=backend)
        out = out if first is None else out[first.to(device)]
        out.backward(out_grad.to(device, dtype))
        return out.detach(), [x.grad for x in leaves]

    exact, exact_grads = run("cpu", torch.float64, "torch", _ncopy_plan(layout, "cpu"), rows, first)
    packed = run("cuda", dtype, "fla", RecurrentPlan.from_layout(layout, "cuda"))
    ncopy = run("cuda", dtype, "fla", _ncopy_plan(layout, "cuda"), rows, first)
    worse = {}
    for name, got, base, want in zip(
        ("out", "dq", "dk", "dv", "dg", "dbeta"), [packed[0], *packed[1]], [ncopy[0], *ncopy[1]], [exact, *exact_grads]
    ):
        error, budget = _relative(got, want), ERROR_RATIO * _relative(base, want) + FLOOR[dtype]
        if not error <= budget:
            worse[name] = f"{error:.2e} > {budget:.2e}"
    assert not worse, worse


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_packed_conv_on_cuda_equals_each_row_alone(dtype):
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(96, layout.num_tokens, generator=gen, dtype=torch.float64)
    weight = torch.randn(96, 4, generator=gen, dtype=torch.float64)
    expected = per_row(lambda rows: conv_row(rows, weight, torch.zeros(96)), [x.T], layout).T
    plan = RecurrentPlan.from_layout(layout, "cuda")
    got = causal_conv1d(x.to("cuda", dtype), weight.to("cuda", dtype), plan, activation=F.silu)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.double().cpu(), expected, rtol=tolerance, atol=tolerance)


def test_missing_flash_linear_attention_is_named_on_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "fla", None)
    monkeypatch.setitem(sys.modules, "fla.ops", None)
    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", None)
    layout = dualkv.Layout.from_lengths([3], [[2]])
    inputs, _ = _inputs(layout.num_tokens)
    with pytest.raises(ImportError, match=r"flash-linear-attention .*dualkv\[hybrid\]"):
        gated_delta_rule(*(x.float().cuda() for x in inputs), RecurrentPlan.from_layout(layout, "cuda"))


def _hopper_triton_refused() -> bool:
    try:
        fla_backend.check_triton_for_backward(torch.device("cuda", 0))
    except fla_backend.TritonTooOld:
        return True
    return False


@pytest.mark.skipif(
    not (torch.cuda.is_available() and _hopper_triton_refused()),
    reason="not a Hopper GPU with a Triton whose gated backward is wrong",
)
def test_hopper_with_an_older_triton_refuses_training_but_not_scoring():
    pytest.importorskip("fla", reason="flash-linear-attention not installed")
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    inputs, _ = _inputs(layout.num_tokens)
    plan = RecurrentPlan.from_layout(layout, "cuda")
    leaves = [x.float().cuda().requires_grad_() for x in inputs]
    with pytest.raises(fla_backend.TritonTooOld, match=r"triton >= 3\.7\.1"):
        gated_delta_rule(*leaves, plan)
    with torch.no_grad():
        got = gated_delta_rule(*leaves, plan)
        expected = gated_delta_rule(*leaves, plan, backend="torch")
    assert _relative(got, expected.double().cpu()) < 2e-3
