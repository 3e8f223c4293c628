"""Hugging Face transformers integration: `attn_implementation="dualkv"`.

Importing this module registers the attention function "dualkv" with transformers'
AttentionInterface, so that

    import dualkv.transformers
    model = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv")
    out = model(input_ids=packed.input_ids, position_ids=packed.position_ids,
                dualkv_layout=packed.layout, use_cache=False)

runs a decoder on the packed batch. `dualkv_layout` travels to every attention layer through
transformers' **kwargs plumbing. Norms, projections, MLPs, MoE routing and RoPE are per token, so
only attention needs the layout; RoPE gets it through the restarted `position_ids`.

Sequence parallelism: a `dualkv.distributed.SequenceParallelLayout` as `dualkv_layout` (see
`dualkv.distributed.shard_sequence`) means the inputs are this rank's rows of the stream and the
layout is global; attention then runs Ulysses over the layout's process group.

No attention mask is built for "dualkv": transformers (5.x) builds a mask only for
implementations registered in its AttentionMaskInterface, and returns None for the others; so
"dualkv" is deliberately left out of that registry, and the layout is the mask.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface

from . import attention
from .distributed import SequenceParallelLayout, ulysses_attention

__all__ = ["ATTENTION_NAME", "dualkv_attention_forward"]

ATTENTION_NAME = "dualkv"


def dualkv_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    softcap: float | None = None,
    dualkv_layout=None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: query (1, H, T, d), key/value (1, Hk, T, d) in the packed
    order -> (1, T, H, d). Grouped-query attention is native (H % Hk == 0); no K/V repetition."""
    if dualkv_layout is None:
        raise ValueError(
            "dualkv_layout: attn_implementation='dualkv' needs the packed layout; call "
            "model(input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout)"
        )
    if attention_mask is not None:
        raise ValueError(
            "attention_mask: must be None with attn_implementation='dualkv' (the layout defines the mask); "
            f"got a tensor of shape {tuple(attention_mask.shape)}"
        )
    if not getattr(module, "is_causal", True):
        raise ValueError(f"{type(module).__name__}: dualkv attention is causal; this layer is not")
    if dropout:
        raise ValueError(
            f"dropout: attention dropout is not supported by dualkv; got p={dropout} (set attention_dropout=0)"
        )
    if sliding_window is not None:
        raise ValueError(f"sliding_window: sliding-window attention is not supported by dualkv; got {sliding_window}")
    if softcap is not None:
        raise ValueError(f"softcap: logit soft-capping is not supported by dualkv; got {softcap}")
    if kwargs.get("s_aux") is not None:
        raise ValueError("s_aux: attention sinks are not supported by dualkv")
    if query.dim() != 4 or query.shape[0] != 1:
        raise ValueError(f"query: expected (1, H, T, d) for one packed sequence, got {tuple(query.shape)}")
    if key.shape[2] != query.shape[2]:
        raise ValueError(
            f"key: {key.shape[2]} keys for {query.shape[2]} queries; dualkv runs whole packed batches "
            "without a KV cache (pass use_cache=False)"
        )
    # (1, H, T, d) -> (T, H, d) views: the op takes any strides with a contiguous head dimension.
    out = _attend(
        query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1), dualkv_layout, softmax_scale=scaling
    )
    return out.unsqueeze(0), None


# --- Sequence parallelism (issue 12) ---------------------------------------------------------
def _attend(q, k, v, dualkv_layout, *, softmax_scale):
    """A SequenceParallelLayout means q, k, v are this rank's rows of a sequence-sharded stream:
    Ulysses attention over its group. Otherwise they are the whole packed stream."""
    if isinstance(dualkv_layout, SequenceParallelLayout):
        return ulysses_attention(q, k, v, dualkv_layout.layout, dualkv_layout.group, softmax_scale=softmax_scale)
    return attention(q, k, v, dualkv_layout, softmax_scale=softmax_scale)


AttentionInterface.register(ATTENTION_NAME, dualkv_attention_forward)
