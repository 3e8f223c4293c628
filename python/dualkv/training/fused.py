"""Fused elementwise layers for a transformers decoder: RMSNorm and the SiLU-gated MLP's activation,
each one torch.compile'd kernel instead of PyTorch's eager chain of passes.

Eager RMSNorm makes about six passes over its input (an fp32 copy, the square, the mean, the
scale, the cast back, the weight) and the gated MLP two (SiLU, then the product); their backward
passes as many again. Fusing them removed a third of the GPU time outside attention and the matrix
products of a Qwen3-8B policy step (docs/perf.md, "Step benchmark"). The fused forms compute the
same functions in the same precision (fp32 statistics, results in the input's dtype); only the
rounding of intermediate values may differ.

The compiled functions take the weights as arguments, so FSDP2's swapping of sharded and
unsharded parameters and activation checkpointing's recomputation see ordinary tensors, and
shapes are dynamic: a new stream length does not recompile.
"""

from __future__ import annotations

import types

import torch

__all__ = ["fuse_elementwise"]


@torch.compile(dynamic=True, fullgraph=True)
def _rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = hidden.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(hidden.dtype)


@torch.compile(dynamic=True, fullgraph=True)
def _silu_gate(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(gate) * up


def _is_rms_norm(module: torch.nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm") and hasattr(module, "variance_epsilon")


# torch's SiLU module and transformers' (ACT2FN["silu"]), which computes the same function.
_SILU_MODULES = ("SiLU", "SiLUActivation")


def _is_silu_gated_mlp(module: torch.nn.Module) -> bool:
    has_projections = all(hasattr(module, name) for name in ("gate_proj", "up_proj", "down_proj"))
    return has_projections and type(getattr(module, "act_fn", None)).__name__ in _SILU_MODULES


def _fused_rms_norm_forward(self, hidden: torch.Tensor) -> torch.Tensor:
    return _rms_norm(hidden, self.weight, self.variance_epsilon)


def _fused_mlp_forward(self, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(_silu_gate(self.gate_proj(x), self.up_proj(x)))


def fuse_elementwise(model: torch.nn.Module) -> int:
    """Routes every RMSNorm (transformers' `*RMSNorm` with `variance_epsilon`) and every SiLU-gated
    MLP (`gate_proj`, `up_proj`, `down_proj`, `act_fn` SiLU) of `model` through the fused functions,
    in place, and returns how many modules it changed. Call it before FSDP sharding or after:
    parameters are read at each call. The new forwards are methods bound to their modules, so a
    deep copy of the model (a frozen reference policy) runs on its own weights. Other modules are
    left as they are."""
    changed = 0
    for module in model.modules():
        if _is_rms_norm(module):
            module.forward = types.MethodType(_fused_rms_norm_forward, module)
        elif _is_silu_gated_mlp(module):
            module.forward = types.MethodType(_fused_mlp_forward, module)
        else:
            continue
        changed += 1
    return changed
