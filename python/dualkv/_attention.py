"""dualkv.attention: shared-prompt attention as a torch.library operator.

The operators torch.ops.dualkv.attention_forward / attention_backward are defined and given their
CPU and CUDA kernels in C++ (python/csrc); this module completes them for PyTorch 2: the fake
kernels that let torch.compile trace them without running them, and the autograd formula. It also
holds the fake kernels of the library's token-score operators (used by dualkv.logprobs), since
the C++ library names this module as the one that completes it.
"""

from __future__ import annotations

import numbers

import torch

from . import _C  # noqa: F401  (loading the extension registers torch.ops.dualkv)
from ._layout import Layout


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    *,
    softmax_scale: float | None = None,
    deterministic: bool = False,
    kernel_family: str = "auto",
) -> torch.Tensor:
    """Attention over the packed shared-prompt layout; returns out (T, H, d), differentiable in
    q, k and v.

    q: (T, H, d); k, v: (T, Hk, d) with H % Hk == 0 (query head h reads kv head h // (H // Hk)).
    One dtype for all (float32, float16 or bfloat16 on the CPU; float16 or bfloat16 on CUDA), one
    device. Any strides with a unit-stride last dimension are used in place (e.g. slices of a
    fused QKV projection). Query token q sees key token k iff k <= q and k is in q's segment or
    one of its ancestors (two-level layouts: both in the same group, k in the group's prompt or in
    q's own segment).

    Under torch.autocast, q, k and v are first cast to the autocast dtype (as for SDPA).

    softmax_scale: defaults to 1 / sqrt(d). deterministic: a backward pass whose results are
    bitwise reproducible on CUDA (the CPU path always is); also chosen whenever
    torch.use_deterministic_algorithms(True) is in effect. kernel_family: the CUDA kernels of the
    forward and of its backward: "auto" (the Hopper kernels on an H100/H200 when they cover the
    call, the portable ones otherwise), "portable" or "hopper" (an error where it cannot run);
    ignored on the CPU. Bad input raises ValueError naming the argument and the rule it broke.
    """
    out, _ = attention_with_lse(
        q, k, v, layout, softmax_scale=softmax_scale, deterministic=deterministic, kernel_family=kernel_family
    )
    return out


def attention_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    *,
    softmax_scale: float | None = None,
    deterministic: bool = False,
    kernel_family: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """`attention` that also returns the softmax log-sum-exp: (out, lse) with lse (H, T) float32,
    the natural log of sum_k exp(softmax_scale * q.k) over each query's visible keys, for callers
    that merge attention states. Gradients flow through out only: lse is not differentiable."""
    _check_arguments(q, k, v, layout, softmax_scale, deterministic, kernel_family)
    q, k, v = _in_autocast_dtype(q, k, v)
    if softmax_scale is not None:
        softmax_scale = float(softmax_scale)
    cu_seqlens, parents = layout._operator_offsets()
    return torch.ops.dualkv.attention_forward(q, k, v, cu_seqlens, parents, softmax_scale, deterministic, kernel_family)


KERNEL_FAMILIES = ("auto", "portable", "hopper")


def _in_autocast_dtype(q, k, v):
    """Under torch.autocast on q's device, q, k and v in the autocast dtype, as autocast does for
    SDPA. A model with fp32 weights under bf16 autocast (a trainer's mixed precision) hands over
    fp32 queries and keys (Qwen3's q/k norms multiply by fp32 weights) beside bf16 values, and the
    kernels take one dtype. The casts are differentiable: gradients return in the inputs' dtypes."""
    device = q.device.type
    if not torch.is_autocast_enabled(device):
        return q, k, v
    dtype = torch.get_autocast_dtype(device)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _check_arguments(q, k, v, layout, softmax_scale, deterministic, kernel_family) -> None:
    """Python-level types only; shapes, dtypes, devices and values are checked by the C++ core."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
        # The fake kernels give shapes for torch.compile's fake tensors; a meta tensor passed in
        # by a caller holds no values, and an attention call on it has no result to return.
        if tensor.device.type == "meta":
            raise ValueError(f"{name}: a tensor on the meta device holds no values; dualkv.attention needs real {name}")
    if not isinstance(layout, Layout):
        raise TypeError(f"layout: expected a dualkv.Layout, got {type(layout).__name__}")
    # Not under torch.compile: there the layout's token count is a value of its offsets that the
    # trace cannot branch on; the core's rule still applies.
    if not torch.compiler.is_compiling():
        for name, tensor in (("q", q), ("k", k), ("v", v)):
            _refuse_head_major(name, tensor, layout.num_tokens)
    if softmax_scale is not None and (isinstance(softmax_scale, bool) or not isinstance(softmax_scale, numbers.Real)):
        raise TypeError(f"softmax_scale: expected a float or None, got {type(softmax_scale).__name__}")
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic: expected a bool, got {type(deterministic).__name__}")
    if kernel_family not in KERNEL_FAMILIES:
        raise ValueError(f"kernel_family: must be one of {KERNEL_FAMILIES}, got {kernel_family!r}")


def _refuse_head_major(name: str, tensor: torch.Tensor, tokens: int) -> None:
    """The core's rule for a wrong token count, with the likely cause when the layout's token count
    sits on the second axis: a (heads, tokens, head_dim) tensor, the order SDPA and most attention
    code use."""
    if tensor.dim() == 3 and tensor.shape[0] != tokens and tensor.shape[1] == tokens:
        raise ValueError(
            f"dualkv: invalid argument '{name}.tokens': must equal the layout's total_tokens ({tokens}), got "
            f"{tensor.shape[0]}; {name} has shape {tuple(tensor.shape)}, with the tokens on its second axis: "
            f"dualkv takes (tokens, heads, head_dim) tensors, so pass a (heads, tokens, head_dim) one as "
            f"{name}.transpose(0, 1)"
        )


def _check_fake_devices(q, cu_seqlens, parents, **like_q) -> None:
    """The device rules of the C++ kernels, for the fake kernels. PyTorch also runs a fake kernel
    for real tensors when any argument is on the meta device; without these checks that call
    would return uninitialised memory on q's device instead of an error."""
    for name, offsets in (("cu_seqlens", cu_seqlens), ("parents", parents)):
        if offsets.device.type != "cpu":
            raise ValueError(f"dualkv: invalid argument '{name}': must be a CPU tensor, got device {offsets.device}")
    for name, tensor in like_q.items():
        if tensor.device != q.device:
            raise ValueError(
                f"dualkv: invalid argument '{name}.device': must match q.device ({q.device}), got {tensor.device}"
            )


@torch.library.register_fake("dualkv::attention_forward")
def _attention_forward_fake(q, k, v, cu_seqlens, parents, softmax_scale, deterministic, kernel_family="auto"):
    _check_fake_devices(q, cu_seqlens, parents, k=k, v=v)
    # Shapes and strides as the C++ kernels allocate them: out contiguous like q, lse (H, T) fp32.
    tokens, heads, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((heads, tokens), dtype=torch.float32)


@torch.library.register_fake("dualkv::attention_backward")
def _attention_backward_fake(
    dout, q, k, v, out, lse, cu_seqlens, parents, softmax_scale, deterministic, kernel_family="auto"
):
    _check_fake_devices(q, cu_seqlens, parents, dout=dout, k=k, v=v, out=out, lse=lse)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, cu_seqlens, parents, softmax_scale, deterministic, kernel_family = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens, parents)
    ctx.softmax_scale = softmax_scale
    ctx.deterministic = deterministic
    ctx.kernel_family = kernel_family
    # The backward kernel has no input for a gradient of lse; marking it keeps a caller from
    # silently losing one.
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_seqlens, parents = ctx.saved_tensors
    dq, dk, dv = torch.ops.dualkv.attention_backward(
        grad_out, q, k, v, out, lse, cu_seqlens, parents, ctx.softmax_scale, ctx.deterministic, ctx.kernel_family
    )
    return dq, dk, dv, None, None, None, None, None


torch.library.register_autograd("dualkv::attention_forward", _backward, setup_context=_setup_context)


def _double_backward(ctx, grad_dq, grad_dk, grad_dv):
    # Without a registration here PyTorch's fallback returns zeros for the second derivative (with
    # only a warning); a gradient of the gradient would be silently wrong, so it is an error.
    raise NotImplementedError(
        "dualkv.attention: double backward is not supported (differentiating dq, dk or dv, e.g. after "
        "torch.autograd.grad(..., create_graph=True)); first-order gradients with create_graph=True are fine"
    )


torch.library.register_autograd("dualkv::attention_backward", _double_backward)


@torch.library.register_fake("dualkv::token_scores_forward")
def _token_scores_forward_fake(logits, inverse_temperature):
    rows = logits.shape[0]
    return logits.new_empty((rows,), dtype=torch.float32), logits.new_empty((rows,), dtype=torch.float32)


@torch.library.register_fake("dualkv::token_scores_backward")
def _token_scores_backward_fake(
    logits, inverse_temperature, lse, entropy, use_offsets, targets, grad_logprob, grad_entropy
):
    return logits.new_empty(logits.shape)
