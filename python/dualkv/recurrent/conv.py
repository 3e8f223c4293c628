"""Short causal depthwise convolution over a packed stream, each segment starting from its tail.

The layers of Gated DeltaNet and Mamba-2 mix each channel over the last `width` tokens (width 4 in
Qwen3.5 and Qwen3-Next). On a packed stream a response's first tokens must read its prompt's last
inputs, not the previous response's; a prompt's first tokens read zeros. One gather builds a stream
in which every segment is preceded by its tail (`RecurrentPlan.conv_tail_index`), one ordinary valid
convolution runs over it, and one gather picks each row's output. No loop over segments; the
backward is autograd's: the gradients of a prompt's last inputs sum over every response that read
them (the gather's backward adds them up).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from .plan import RecurrentPlan

__all__ = ["causal_conv1d"]


def causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    plan: RecurrentPlan,
    *,
    bias: torch.Tensor | None = None,
    activation: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """x: (C, T) channels by packed rows (any strides); weight: (C, width); bias: (C,) or None.

    Returns (C, T) in x's dtype: out[c, t] = activation(bias[c] + sum_j weight[c, j] x[c, t_j]),
    t_j the token width-1-j steps before t on t's own path (zero before the path starts). Computed
    in weight's dtype, as transformers' reference convolution does.
    """
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[0] != x.shape[0]:
        raise ValueError(
            f"x, weight: expected x (C, T) and weight (C, width), got {tuple(x.shape)} and {tuple(weight.shape)}"
        )
    if x.shape[1] != plan.num_tokens:
        raise ValueError(f"x: {x.shape[1]} rows for a plan of {plan.num_tokens} packed tokens")
    if weight.device != x.device or plan.order.device != x.device:
        raise ValueError(
            f"x.device: {x.device}, but weight is on {weight.device} and the plan's index tensors on "
            f"{plan.order.device}; all must be on one device"
        )
    channels, width = weight.shape
    source, output_rows = plan.conv_tail_index(width)
    padded = F.pad(x.to(weight.dtype), (0, 1))  # column T: the zeros before a root
    stream = padded.index_select(1, source)
    out = F.conv1d(stream.unsqueeze(0), weight.unsqueeze(1), bias, groups=channels)[0]
    out = out.index_select(1, output_rows)
    if activation is not None:
        out = activation(out)
    return out.to(x.dtype)
