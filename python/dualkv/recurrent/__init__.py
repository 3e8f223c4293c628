"""dualkv.recurrent: recurrent token mixers on the packed stream, each segment starting from the
state its path has reached (the prompt's final state for a response).

- `RecurrentPlan`: the per-segment description (segment -> the segment whose final state and
  convolution tail it starts from) and the schedule that follows from it (waves of varlen calls).
- `causal_conv1d`: the short depthwise causal convolution with per-segment tails.
- `gated_delta_rule`: Gated DeltaNet's recurrence (Qwen3.5, Qwen3-Next) with the state hand-off;
  flash-linear-attention's kernels on CUDA, dualkv's PyTorch recurrence on the CPU.
- `gated_delta_rule_reference`: that PyTorch recurrence on its own (varlen, initial and final states).
- `warm_up_fla`: autotunes flash-linear-attention's kernels for a layer's shapes on a small input.

See docs/recurrent.md.
"""

from .conv import causal_conv1d
from .delta_rule import gated_delta_rule_reference
from .fla_backend import warm_up_fla
from .handoff import BACKENDS, gated_delta_rule
from .plan import RecurrentPlan, Wave

__all__ = [
    "BACKENDS",
    "RecurrentPlan",
    "Wave",
    "causal_conv1d",
    "gated_delta_rule",
    "gated_delta_rule_reference",
    "warm_up_fla",
]
