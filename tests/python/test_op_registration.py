"""torch.ops.dualkv as PyTorch 2 sees it: opcheck (schema, fake kernels, autograd registration,
AOT dispatch) and torch.compile(fullgraph=True) of code that calls dualkv.attention."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import dualkv

HEADS, KV_HEADS, HEAD_DIM = 4, 2, 64
# opcheck runs on every device with a kernel; CUDA kernels take 16-bit floats.
DEVICE_DTYPES = [
    pytest.param("cpu", torch.float32, id="cpu"),
    pytest.param(
        "cuda", torch.bfloat16, id="cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
    ),
]


@pytest.fixture
def layout():
    return dualkv.Layout.from_lengths([3, 1], [[2, 1, 4], [2]])


@pytest.fixture
def inputs(layout, make_qkv):
    return make_qkv(layout.num_tokens, HEADS, KV_HEADS, HEAD_DIM)


def on_device(tensors, device, dtype):
    return tuple(t.detach().to(device, dtype).requires_grad_(t.requires_grad) for t in tensors)


@pytest.mark.parametrize("device, dtype", DEVICE_DTYPES)
def test_opcheck_forward(device, dtype, layout, inputs):
    q, k, v = on_device(inputs, device, dtype)
    for softmax_scale in (None, 0.5):
        torch.library.opcheck(
            torch.ops.dualkv.attention_forward.default,
            (q, k, v, layout.cu_seqlens, layout.parents, softmax_scale, False),
        )


@pytest.mark.parametrize("device, dtype", DEVICE_DTYPES)
def test_opcheck_backward(device, dtype, layout, inputs, generator):
    q, k, v = (t.detach() for t in on_device(inputs, device, dtype))
    out, lse = torch.ops.dualkv.attention_forward(q, k, v, layout.cu_seqlens, layout.parents, None, False)
    dout = torch.randn(out.shape, generator=generator).to(device, dtype)
    torch.library.opcheck(
        torch.ops.dualkv.attention_backward.default,
        (dout, q, k, v, out, lse, layout.cu_seqlens, layout.parents, None, True, "portable"),
    )


def test_both_operators_take_kernel_family_with_one_default():
    def kernel_family(operator):
        (argument,) = [a for a in operator.default._schema.arguments if a.name == "kernel_family"]
        return str(argument.type), argument.default_value

    forward, backward = torch.ops.dualkv.attention_forward, torch.ops.dualkv.attention_backward
    assert kernel_family(forward) == kernel_family(backward) == ("str", "auto")


def test_attention_operators_are_kept_out_of_compiled_cuda_graphs():
    """Their work depends on the CPU offset tensors' values, which a CUDA graph that torch.compile
    records (mode="reduce-overhead") would freeze; the token-score operators have no such input."""
    attention = (torch.ops.dualkv.attention_forward.default, torch.ops.dualkv.attention_backward.default)
    scores = (torch.ops.dualkv.token_scores_forward.default, torch.ops.dualkv.token_scores_backward.default)
    for operator in attention:
        assert torch.Tag.cudagraph_unsafe in operator.tags, operator
    for operator in scores:
        assert torch.Tag.cudagraph_unsafe not in operator.tags, operator


class _RecordBackwardCalls(TorchDispatchMode):
    """The arguments, by name, of every attention_backward call made while the mode is active
    (the dispatcher drops trailing arguments equal to their defaults, so those are filled in)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.dualkv.attention_backward.default:
            schema = func._schema.arguments
            defaults = {a.name: a.default_value for a in schema if a.has_default_value()}
            self.calls.append({**defaults, **dict(zip([a.name for a in schema], args)), **(kwargs or {})})
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kernel_family", ["auto", "portable", "hopper"])
def test_autograd_hands_kernel_family_to_the_backward(kernel_family, layout, inputs):
    """What the CUDA backward runs with; the CPU ignores the family, so its call is inspected."""
    out = dualkv.attention(*inputs, layout, deterministic=True, kernel_family=kernel_family)
    with _RecordBackwardCalls() as recorded:
        out.sum().backward()
    (call,) = recorded.calls
    assert (call["deterministic"], call["kernel_family"]) == (True, kernel_family)


def test_lse_is_not_differentiable(layout, inputs):
    out, lse = dualkv.attention_with_lse(*inputs, layout)
    assert out.requires_grad and not lse.requires_grad


def _loss_and_grads(function, q, k, v, layout):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    loss = function(q, k, v, layout)
    loss.backward()
    return loss.detach(), q.grad, k.grad, v.grad


def _attention_loss(q, k, v, layout):
    # Surrounding torch ops on both sides, so the op sits inside a larger traced graph.
    out = dualkv.attention(q * 1.5, k, v, layout, softmax_scale=0.25)
    head_weights = torch.arange(out.shape[1], dtype=torch.float32, device=out.device)
    return (out.float().square() * head_weights[None, :, None]).sum()


@pytest.mark.parametrize("device, dtype", DEVICE_DTYPES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_matches_eager(backend, device, dtype, layout, inputs):
    torch._dynamo.reset()
    inputs = on_device(inputs, device, dtype)
    compiled = torch.compile(_attention_loss, fullgraph=True, backend=backend)
    expected = _loss_and_grads(_attention_loss, *inputs, layout)
    actual = _loss_and_grads(compiled, *inputs, layout)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


def test_double_backward_is_an_error_not_zeros(layout, inputs):
    q, k, v = inputs
    loss = dualkv.attention(q, k, v, layout).square().sum()
    expected = torch.autograd.grad(loss, (q, k, v), retain_graph=True)
    # First order under create_graph (gradient penalties build this graph) is unchanged...
    grads = torch.autograd.grad(loss, (q, k, v), create_graph=True)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # ...and differentiating those gradients says it is unsupported instead of returning zeros.
    with pytest.raises(NotImplementedError, match="double backward is not supported"):
        torch.autograd.grad(grads[0].square().sum(), k)
