"""The gated delta rule on CUDA: flash-linear-attention's chunked varlen kernels.

`chunk_gated_delta_rule` (package flash-linear-attention, ops in fla-core) takes many sequences in
one call (cu_seqlens), an initial state per sequence and returns each final state, with gradients
for all of them: what the state hand-off needs. It is an optional dependency (`pip install
dualkv[hybrid]`); without it a CUDA call is an error naming the package, never a slow fallback.

On Hopper GPUs, Triton from 3.4.0 up to (not including) 3.7.1 computes the gated backward of that
kernel wrongly (flash-linear-attention refuses it in `chunk_bwd_dqkwg`); torch 2.11 ships Triton
3.6. A call that will need the backward is refused here, before the forward runs, with the
requirement stated.

The kernels autotune on first use per (heads, head dims, dtype), on the inputs of that call; the
tuning keys leave out the length, so `warm_up_fla` tunes them on a small input once, instead of
on a training step's hundreds of thousands of tokens (minutes there).
"""

from __future__ import annotations

import torch

__all__ = [
    "FLA_PACKAGE",
    "TRITON_HOPPER_MINIMUM",
    "FlaMissing",
    "HybridUnavailable",
    "TritonTooOld",
    "fla_gated_delta_rule",
    "warm_up_fla",
]

FLA_PACKAGE = "flash-linear-attention"
TRITON_HOPPER_MINIMUM = (3, 7, 1)
# Versions whose gated backward on Hopper is wrong: [3.4.0, 3.7.1).
_TRITON_HOPPER_BROKEN_FROM = (3, 4, 0)


class HybridUnavailable(RuntimeError):
    """Gated DeltaNet cannot run correctly on this machine's CUDA device (a missing optional package,
    or a Triton whose code for its backward is wrong on this GPU)."""


class FlaMissing(HybridUnavailable, ImportError):
    """flash-linear-attention is not installed."""


class TritonTooOld(HybridUnavailable):
    """The installed Triton computes flash-linear-attention's gated backward wrongly on this GPU."""


def fla_gated_delta_rule(q, k, v, g, beta, cu_seqlens, cu_seqlens_cpu, *, initial_state, output_final_state, scale):
    """`gated_delta_rule_reference`'s contract on CUDA: q, k (T, H, K), v (T, H, V), g, beta (T, H)
    packed rows; cu_seqlens (n+1,) int64 on q's device (cu_seqlens_cpu its host copy)."""
    chunk_gated_delta_rule = _import_fla()
    needs_backward = torch.is_grad_enabled() and any(
        x is not None and x.requires_grad for x in (q, k, v, g, beta, initial_state)
    )
    if needs_backward:
        check_triton_for_backward(q.device)
    o, final = chunk_gated_delta_rule(
        *(x.unsqueeze(0) for x in (q, k, v, g, beta)),
        scale=scale,
        initial_state=initial_state,
        output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=True,
        cu_seqlens=cu_seqlens,
        cu_seqlens_cpu=cu_seqlens_cpu,
    )
    return o[0], final


def warm_up_fla(heads: int, key_dim: int, value_dim: int, dtype: torch.dtype, device) -> None:
    """Runs the kernels a packed step uses (a wave from zeros with final states, a wave from
    initial states, forward and backward) on a small input of these shapes, so that their
    autotuning happens here and not on the first real batch."""
    from .handoff import gated_delta_rule
    from .plan import RecurrentPlan

    plan = RecurrentPlan([0, 300, 400, 600, 700], [-1, 0, 0, -1], device)
    generator = torch.Generator(device=device).manual_seed(0)

    def draw(*shape):
        return torch.randn(*shape, generator=generator, device=device).to(dtype).requires_grad_()

    q, k = draw(700, heads, key_dim), draw(700, heads, key_dim)
    v = draw(700, heads, value_dim)
    g = torch.nn.functional.logsigmoid(torch.randn(700, heads, generator=generator, device=device)).requires_grad_()
    beta = torch.rand(700, heads, generator=generator, device=device).to(dtype).requires_grad_()
    gated_delta_rule(q, k, v, g, beta, plan, backend="fla").sum().backward()
    torch.cuda.synchronize(device)


def _import_fla():
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except ImportError as error:
        raise FlaMissing(
            f"Gated DeltaNet layers on CUDA need the package {FLA_PACKAGE} (and fla-core): "
            f"pip install 'dualkv[hybrid]' (import failed: {error})"
        ) from error
    return chunk_gated_delta_rule


def check_triton_for_backward(device: torch.device) -> None:
    """Raises when flash-linear-attention's gated backward would be wrong (or refused) here."""
    if torch.cuda.get_device_capability(device)[0] != 9:
        return
    version = _triton_version()
    if _TRITON_HOPPER_BROKEN_FROM <= version < TRITON_HOPPER_MINIMUM:
        minimum = ".".join(map(str, TRITON_HOPPER_MINIMUM))
        raise TritonTooOld(
            f"triton: Gated DeltaNet's backward on a Hopper GPU ({torch.cuda.get_device_name(device)}) needs "
            f"triton >= {minimum}; {'.'.join(map(str, version))} is installed, whose code for "
            f"{FLA_PACKAGE}'s gated chunk backward is wrong on Hopper. Install triton >= {minimum} "
            "(forward-only calls, e.g. log-probs under torch.no_grad(), are not affected)"
        )


def _triton_version() -> tuple[int, ...]:
    import triton

    text = triton.__version__
    numbers = []
    for part in text.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        numbers.append(int(digits) if digits else 0)
    return tuple(numbers)
