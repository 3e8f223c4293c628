"""Fused elementwise layers for a transformers decoder: RMSNorm (also the zero-centred form of
Qwen3.5, Qwen3-Next and Gemma 3, whose weight is an offset from 1), the SiLU-gated MLP's activation
and the rotary position embedding (RoPE, also Qwen3.5's partial one, which rotates the first
features of each head and passes the rest), each one torch.compile'd kernel instead of PyTorch's
eager chain of passes.

Eager RMSNorm makes about six passes over its input (an fp32 copy, the square, the mean, the
scale, the cast back, the weight) and the gated MLP two (SiLU, then the product); their backward
passes as many again. Fusing them removed a third of the GPU time outside attention and the matrix
products of a Qwen3-8B policy step (docs/benchmarks.md, "The GRPO policy-update step"). Eager RoPE (transformers'
`apply_rotary_pos_emb`: `q * cos + rotate_half(q) * sin`, the same for k) makes five passes over
each of q and k (the product with cos, the negated half, the torch.cat, the product with sin, the
sum) and as many in backward, a cost shared by every attention implementation. The fused forms
compute the same functions in the same precision: fp32 statistics for the norm, and every result
in the dtype eager gives it (for RoPE q's and k's dtype, since Qwen3's rotary embedding casts cos
and sin to it), from the same operations in the same order. Only the rounding of intermediate
values may differ: Inductor keeps them in fp32 where eager rounds each one to bf16.

The compiled functions take the weights, and for RoPE that call's cos and sin, as arguments, so
FSDP2's swapping of sharded and unsharded parameters and activation checkpointing's recomputation
see ordinary tensors. Shapes are dynamic, so a new stream length does not recompile, except the
feature and head dimensions, which are marked static: constants of the kernels. With every
dimension symbolic, Inductor indexed the RoPE by runtime divisions by the head dimension and ran it
at a quarter of the static kernel's speed on an H200 (docs/decisions.md, "Fused RMSNorm, SiLU gate
and RoPE are opt-in").

RoPE is fused per attention module, with no process-wide effect: transformers' attention forward
(Qwen3's, Qwen3-MoE's, Qwen3.5's, and any other whose class forward calls a module-global
`apply_rotary_pos_emb` with the code of transformers' standard one or of Qwen3.5's partial one)
looks that function up in its module's globals at call time. Each such module gets, as a method
bound to it, the same forward function (the same code object, not a copy of transformers' source)
over a copy of those globals in which `apply_rotary_pos_emb` is the fused one. transformers'
modules are not modified, so other models of the same class keep the eager RoPE. The copy is taken
at the first fusion of that class: a later reassignment of a global in transformers' module (e.g.
by a kernel-replacement library) is not seen by the fused modules; mutations of the objects it
holds (the attention registry) are.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable

import torch

__all__ = ["fuse_elementwise"]


def _static_dims(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """x with `dims` marked static for the compiled functions below (compiled with every other
    dimension symbolic). Inside a compiled caller the marks are not needed (the caller's trace
    decides) and not placed."""
    if not torch.compiler.is_compiling():
        for dim in dims:
            torch._dynamo.mark_static(x, dim)
    return x


# One training step can call each compiled function below in more variants than Dynamo's default
# limit of 8 per function, after which a fullgraph compilation fails: ranks 3 and 4 (hidden states,
# per-head q/k norms), a strided input (Qwen3.5's query is a chunk of a wider projection), grad mode
# on and off (the old policy's log-probs), inputs that do and do not require grad, fp32 and bf16. So
# they run with a higher limit, set for their own calls only.
_RECOMPILE_LIMIT = 64


def _call_compiled(function: Callable, *args):
    if torch.compiler.is_compiling():  # inside a compiled caller, whose trace inlines the function
        return function(*args)
    with torch._dynamo.config.patch(recompile_limit=_RECOMPILE_LIMIT):
        return function(*args)


def _features_static(x: torch.Tensor) -> torch.Tensor:
    """The last dimension static: the hidden size of a norm or an MLP, the head dimension of a
    per-head norm."""
    return _static_dims(x, (x.dim() - 1,))


@torch.compile(dynamic=True, fullgraph=True)
def _rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = hidden.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(hidden.dtype)


@torch.compile(dynamic=True, fullgraph=True)
def _zero_centred_rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # Qwen3.5's (and Qwen3-Next's, Gemma 3's) RMSNorm: the weight is an offset from 1, applied in fp32.
    x = hidden.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return (x * (1.0 + weight.float())).type_as(hidden)


@torch.compile(dynamic=True, fullgraph=True)
def _silu_gate(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(gate) * up


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # transformers' `(x * cos) + (rotate_half(x) * sin)`, the same operations in the same order.
    half = x.shape[-1] // 2
    return (x * cos) + (torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)


def _rotate_partial(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Qwen3.5's: the first cos.shape[-1] features rotated as above, the rest passed through.
    rotary_dim = cos.shape[-1]
    return torch.cat([_rotate(x[..., :rotary_dim], cos, sin), x[..., rotary_dim:]], dim=-1)


@torch.compile(dynamic=True, fullgraph=True)
def _rotary(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return _rotate(q, cos, sin), _rotate(k, cos, sin)


@torch.compile(dynamic=True, fullgraph=True)
def _partial_rotary(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return _rotate_partial(q, cos, sin), _rotate_partial(k, cos, sin)


def _apply_compiled_rotary(rotary: Callable, q, k, cos, sin, unsqueeze_dim):
    """transformers' `apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)` through the compiled
    `rotary`; the unsqueeze and transposes are views, done outside it."""
    if unsqueeze_dim == 1:
        # q, k (B, H, T, d): in transformers' attention, transposes of the (B, T, H, d) projections.
        # Rotated in that storage order, the compiled backward returns their gradients in it too, so
        # the projections' backward views them without a copy (in the (B, H, T, d) order it would
        # return them contiguous in that order, and the projection's backward would copy q and k).
        rotated = _apply_compiled_rotary(rotary, q.transpose(1, 2), k.transpose(1, 2), cos, sin, 2)
        return tuple(x.transpose(1, 2) for x in rotated)
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    # The heads and the head (or rotary) dimension static: (B, T, H, d), the layout unsqueeze_dim 2
    # is used with.
    return _call_compiled(rotary, *(_static_dims(x, (2, 3)) for x in (q, k, cos, sin)))


def _fused_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' standard `apply_rotary_pos_emb` (same signature, same function), compiled."""
    return _apply_compiled_rotary(_rotary, q, k, cos, sin, unsqueeze_dim)


def _fused_apply_partial_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """Qwen3.5's `apply_rotary_pos_emb` (the first cos.shape[-1] features rotated), compiled."""
    return _apply_compiled_rotary(_partial_rotary, q, k, cos, sin, unsqueeze_dim)


def _is_rms_norm(module: torch.nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm") and hasattr(module, "variance_epsilon")


@functools.cache
def _reference_zero_centred_norm_keys() -> tuple[tuple, tuple] | None:
    """The code keys of Qwen3.5's RMSNorm forward and _norm (Qwen3-Next, Qwen3.5-MoE and Gemma 3
    carry the same code); None without a transformers that has Qwen3.5, or where they are not plain
    functions (kernelized), in which case no such norm is fused."""
    try:
        from transformers.models.qwen3_5 import modeling_qwen3_5
    except ImportError:
        return None
    norm = modeling_qwen3_5.Qwen3_5RMSNorm
    if not (isinstance(norm.forward, types.FunctionType) and isinstance(norm._norm, types.FunctionType)):
        return None
    return _code_key(norm.forward), _code_key(norm._norm)


def _forward_is_free(module: torch.nn.Module, fused: Callable) -> bool:
    """Whether `module` runs its class's forward or `fused`, already bound by fuse_elementwise
    (binding it again changes nothing). A forward something else put on the instance is left alone."""
    own = module.__dict__.get("forward")
    return own is None or getattr(own, "__func__", None) is fused


def _is_zero_centred_rms_norm(module: torch.nn.Module) -> bool:
    """A norm whose class runs exactly Qwen3.5's RMSNorm code, its forward not replaced by something
    else. Matched by code, not by name: a class that only looks like it keeps its forward."""
    reference = _reference_zero_centred_norm_keys()
    cls = type(module)
    forward, norm = getattr(cls, "forward", None), getattr(cls, "_norm", None)
    return (
        reference is not None
        and _forward_is_free(module, _fused_zero_centred_rms_norm_forward)
        and isinstance(forward, types.FunctionType)
        and isinstance(norm, types.FunctionType)
        and (_code_key(forward), _code_key(norm)) == reference
        and isinstance(getattr(module, "weight", None), torch.Tensor)
    )


# torch's SiLU module and transformers' (ACT2FN["silu"]), which computes the same function.
_SILU_MODULES = ("SiLU", "SiLUActivation")


def _is_silu_gated_mlp(module: torch.nn.Module) -> bool:
    has_projections = all(hasattr(module, name) for name in ("gate_proj", "up_proj", "down_proj"))
    return has_projections and type(getattr(module, "act_fn", None)).__name__ in _SILU_MODULES


_ROPE = "apply_rotary_pos_emb"


def _code_key(function: types.FunctionType) -> tuple:
    """What a function computes, without its docstring and source position: two functions with the
    same key and the same globals they read run the same operations."""
    code = function.__code__
    consts = code.co_consts
    if function.__doc__ is not None and consts and consts[0] == function.__doc__:
        consts = consts[1:]
    return (code.co_code, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount, consts,
            function.__defaults__, function.__kwdefaults__, function.__closure__)


@functools.cache
def _reference_ropes() -> tuple[tuple[tuple, tuple, Callable], ...]:
    """(code key of `apply_rotary_pos_emb`, code key of `rotate_half`, the fused function) for
    transformers' standard RoPE (Qwen3's; Llama, Qwen2, Qwen3-MoE and many more carry the same code)
    and Qwen3.5's partial one (Qwen3.5-MoE and Qwen3-Next carry it). A reference that is not a plain
    function (e.g. wrapped by a kernel-replacement library) is left out: such a RoPE is not fused."""
    from transformers.models.qwen3 import modeling_qwen3

    modules = [(modeling_qwen3, _fused_apply_rotary_pos_emb)]
    try:
        from transformers.models.qwen3_5 import modeling_qwen3_5

        modules.append((modeling_qwen3_5, _fused_apply_partial_rotary_pos_emb))
    except ImportError:
        pass
    references = []
    for module, fused in modules:
        rope, rotate_half = module.apply_rotary_pos_emb, module.rotate_half
        if isinstance(rope, types.FunctionType) and isinstance(rotate_half, types.FunctionType):
            references.append((_code_key(rope), _code_key(rotate_half), fused))
    return tuple(references)


def _fused_transformers_rope(function: object) -> Callable | None:
    """The fused form of `function` if it is one of transformers' RoPEs (with its own module's
    `rotate_half`), else None."""
    if not isinstance(function, types.FunctionType):
        return None
    rotate_half = function.__globals__.get("rotate_half")
    if not isinstance(rotate_half, types.FunctionType):
        return None
    keys = (_code_key(function), _code_key(rotate_half))
    return next((fused for rope, half, fused in _reference_ropes() if (rope, half) == keys), None)


# A class's forward -> the same function over globals in which `apply_rotary_pos_emb` is the fused
# one; one per class forward, so fusing again (or another model of the class) binds the same function.
_fused_rope_forwards: dict[types.FunctionType, types.FunctionType] = {}


def _fused_rope_forward(module: torch.nn.Module) -> Callable | None:
    """For an attention module whose class forward calls transformers' `apply_rotary_pos_emb` (a
    module global, looked up at call time): that forward with the fused RoPE. None for any other
    module, and for one whose forward was already replaced on the instance by something else."""
    forward = getattr(type(module), "forward", None)
    if not isinstance(forward, types.FunctionType) or _ROPE not in forward.__code__.co_names:
        return None
    fused = _fused_rope_forwards.get(forward)
    if fused is None:
        fused_rope = _fused_transformers_rope(forward.__globals__.get(_ROPE))
        if fused_rope is None:
            return None
        namespace = dict(forward.__globals__)
        namespace[_ROPE] = fused_rope
        fused = types.FunctionType(
            forward.__code__, namespace, forward.__name__, forward.__defaults__, forward.__closure__
        )
        functools.update_wrapper(fused, forward)  # name, docstring, annotations, __wrapped__
        fused.__kwdefaults__ = forward.__kwdefaults__
        _fused_rope_forwards[forward] = fused
    return fused if _forward_is_free(module, fused) else None


def _fused_rms_norm_forward(self, hidden: torch.Tensor) -> torch.Tensor:
    return _call_compiled(_rms_norm, _features_static(hidden), self.weight, self.variance_epsilon)


def _fused_zero_centred_rms_norm_forward(self, hidden: torch.Tensor) -> torch.Tensor:
    return _call_compiled(_zero_centred_rms_norm, _features_static(hidden), self.weight, self.eps)


def _fused_mlp_forward(self, x: torch.Tensor) -> torch.Tensor:
    gated = _call_compiled(_silu_gate, _features_static(self.gate_proj(x)), _features_static(self.up_proj(x)))
    return self.down_proj(gated)


def fuse_elementwise(model: torch.nn.Module) -> int:
    """Routes every RMSNorm (transformers' `*RMSNorm` with `variance_epsilon`, and every norm whose
    class runs Qwen3.5's zero-centred RMSNorm code: Qwen3.5, Qwen3-Next, Gemma 3), every SiLU-gated
    MLP (`gate_proj`, `up_proj`, `down_proj`, `act_fn` SiLU) and the RoPE of every attention module
    whose class forward calls transformers' standard or Qwen3.5's partial `apply_rotary_pos_emb`
    (see the module docstring) of `model` through the fused functions, in place, and returns how
    many modules it routed: each norm, MLP and attention module counts once. Calling it again is
    harmless: it binds the same functions to the same modules and returns the same number. Call it
    before FSDP sharding or after: parameters are read at each call. The new forwards are methods
    bound to their modules, so a deep copy of the model (a frozen reference policy) runs on its own
    weights. Other modules, and an attention module whose forward something else already replaced,
    are left as they are; nothing outside `model` changes."""
    changed = 0
    for module in model.modules():
        if _is_rms_norm(module):
            module.forward = types.MethodType(_fused_rms_norm_forward, module)
        elif _is_zero_centred_rms_norm(module):
            module.forward = types.MethodType(_fused_zero_centred_rms_norm_forward, module)
        elif _is_silu_gated_mlp(module):
            module.forward = types.MethodType(_fused_mlp_forward, module)
        elif (forward := _fused_rope_forward(module)) is not None:
            module.forward = types.MethodType(forward, module)
        else:
            continue
        changed += 1
    return changed
