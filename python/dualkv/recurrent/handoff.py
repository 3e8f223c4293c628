"""The gated delta rule over a packed stream with the state hand-off.

Each segment starts from its parent's final state (`RecurrentPlan`): for the shared-prompt layout,
all prompts run in one varlen call from zeros, their final states are gathered by group, and all
responses run in a second varlen call from those (a group with one response is one sequence of
the first call). The gather is differentiable, so the backward sums the N responses'
initial-state gradients into their prompt's final state. Equal to running every [prompt; response]
row alone.

Backends: "torch" (dualkv's PyTorch recurrence, the CPU path), "fla" (flash-linear-attention's
kernels, CUDA), "auto" (fla on CUDA, torch elsewhere).
"""

from __future__ import annotations

import torch

from .delta_rule import gated_delta_rule_reference
from .fla_backend import fla_gated_delta_rule
from .plan import RecurrentPlan

__all__ = ["BACKENDS", "gated_delta_rule"]

BACKENDS = ("auto", "torch", "fla")


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    plan: RecurrentPlan,
    *,
    scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Gated delta rule with L2-normalised q and k over the packed stream described by `plan`.

    q, k: (T, H, K); v: (T, H, V); g (log-decay), beta: (T, H), in packed order on one device.
    Returns o (T, H, V) in q's dtype, differentiable in all five.
    """
    _check(q, k, v, g, beta, plan, backend)
    run = _backend(q.device, backend)
    inputs = (q, k, v, g, beta)
    wave_inputs = inputs if plan.in_packed_order else [x.index_select(0, plan.order) for x in inputs]
    outputs, states = [], []
    for wave in plan.waves:
        initial = None if wave.state_source is None else torch.cat(states).index_select(0, wave.state_source)
        o, final = run(
            *(x[wave.start : wave.end] for x in wave_inputs),
            wave.cu_seqlens,
            wave.cu_seqlens_cpu,
            initial_state=initial,
            output_final_state=wave.produces_states,
            scale=scale,
        )
        outputs.append(o)
        if wave.produces_states:
            states.append(final)
    out = torch.cat(outputs) if len(outputs) > 1 else outputs[0]
    return out if plan.in_packed_order else out.index_select(0, plan.inverse_order)


def _torch_gated_delta_rule(q, k, v, g, beta, cu_seqlens, cu_seqlens_cpu, *, initial_state, output_final_state, scale):
    return gated_delta_rule_reference(
        q,
        k,
        v,
        g,
        beta,
        cu_seqlens_cpu,
        initial_state=initial_state,
        output_final_state=output_final_state,
        scale=scale,
    )


def _backend(device: torch.device, backend: str):
    if backend == "torch" or (backend == "auto" and device.type != "cuda"):
        return _torch_gated_delta_rule
    if device.type != "cuda":
        raise ValueError(f"backend: 'fla' runs on CUDA tensors only, got tensors on {device}")
    return fla_gated_delta_rule


def _check(q, k, v, g, beta, plan, backend) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(plan, RecurrentPlan):
        raise TypeError(f"plan: expected a dualkv.recurrent.RecurrentPlan, got {type(plan).__name__}")
    if q.dim() != 3 or k.shape != q.shape:
        raise ValueError(f"q, k: expected equal shapes (T, H, K), got {tuple(q.shape)} and {tuple(k.shape)}")
    tokens, heads = q.shape[:2]
    if v.dim() != 3 or v.shape[:2] != (tokens, heads):
        raise ValueError(f"v: expected (T, H, V) with T = {tokens}, H = {heads}, got {tuple(v.shape)}")
    for name, x in (("g", g), ("beta", beta)):
        if x.shape != (tokens, heads):
            raise ValueError(f"{name}: expected (T, H) = {(tokens, heads)}, got {tuple(x.shape)}")
    if tokens != plan.num_tokens:
        raise ValueError(f"q: {tokens} rows for a plan of {plan.num_tokens} packed tokens")
    for name, x in (("k", k), ("v", v), ("g", g), ("beta", beta)):
        if x.device != q.device:
            raise ValueError(f"{name}.device: must match q.device ({q.device}), got {x.device}")
    if plan.order.device != q.device:
        raise ValueError(f"plan: its index tensors are on {plan.order.device}, the inputs on {q.device}")
