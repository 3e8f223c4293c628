"""What the step benchmark feeds each method and how much work that is.

Micro-batches are counted in responses, the unit trainers size them in (veRL's
ppo_micro_batch_size): the packed stream holds whole groups while they fit, and a group larger
than the micro-batch is cut into slices that each carry the prompt (as dualkv.microbatch splits a
group over its token budget); the N-copy stream holds one [prompt; response] row per response.

FLOPs are model FLOPs: 2 per multiply-add of the linear layers, the attention matmuls over the
visible query-key pairs (QK^T and PV: 4 H d per pair), and the LM head on the scored tokens. A
mixture-of-experts layer (transformers' Qwen3-MoE rule: a layer is sparse unless it is in
mlp_only_layers or (index + 1) is not a multiple of decoder_sparse_step) counts its active
parameters: the router (h x num_experts), num_experts_per_tok experts of 3 h
moe_intermediate_size each and, where the model has one (Qwen3.5-MoE, Qwen3-Next), the shared
expert (3 h shared_expert_intermediate_size) and its gate (h); a dense layer, 3 h
intermediate_size. Hybrid models (config.layer_types) count attention only in their
"full_attention" layers (with the output gate's second half of q_proj in Qwen3.5 and Qwen3-Next),
and in each "linear_attention" (Gated DeltaNet) layer per token: its projections (q, k, v, the
output gate z, b, a and the output), the depthwise convolution (conv_dim x width) and the
recurrence's three K x V matrix-vector products per value head (read the state at k, write the
update, read it at q). A step is the old-log-prob
forward, the forward and the backward (twice the forward): 4 forwards. Activation-checkpoint
recomputation is not counted (MFU convention). "Honest" counts the deduplicated batch (each
prompt once), "effective" the N-copy batch, for every method alike, so both are useful work per
second, not the work a method chose to do.
"""

from __future__ import annotations

from collections.abc import Sequence

import dualkv
from dualkv.training.rollouts import RolloutGroup

STEP_FORWARDS = 4  # old log-probs (forward only) + forward + backward (2 forwards)

# Dense bf16 tensor-core peak, FLOP/s, by a substring of torch.cuda.get_device_name().
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}

ResponseId = tuple[int, int]  # (group, response) in the rank's rollout batch


def packed_micro_batches(groups: Sequence[RolloutGroup], size: int) -> list[tuple[dualkv.PackedBatch, list[ResponseId]]]:
    """The packed stream in micro-batches of at most `size` responses (see the module doc)."""
    slices = [
        (g, list(range(start, min(start + size, len(group.responses)))))
        for g, group in enumerate(groups)
        for start in range(0, len(group.responses), size)
    ]
    batches, current = [], []
    for piece in slices:
        if current and sum(len(ids) for _, ids in current) + len(piece[1]) > size:
            batches.append(current)
            current = []
        current.append(piece)
    batches.append(current)
    return [
        (
            dualkv.pack([groups[g].prompt for g, _ in batch], [[groups[g].responses[i] for i in ids] for g, ids in batch]),
            [(g, i) for g, ids in batch for i in ids],
        )
        for batch in batches
    ]


def ncopy_micro_batches(groups: Sequence[RolloutGroup], size: int) -> list[tuple[dualkv.PackedBatch, list[ResponseId]]]:
    """The N-copy stream, `size` rows per micro-batch: each row a layout group with one response,
    so the stream has no padding and every row restarts its positions at 0."""
    rows = [(g, i) for g, group in enumerate(groups) for i in range(len(group.responses))]
    return [
        (
            dualkv.pack([groups[g].prompt for g, _ in chunk], [[groups[g].responses[i]] for g, i in chunk]),
            chunk,
        )
        for chunk in (rows[start : start + size] for start in range(0, len(rows), size))
    ]


def batch_counts(groups: Sequence[RolloutGroup]) -> dict:
    """Tokens and visible query-key pairs of the deduplicated and the N-copy batch, and the
    scored (response) tokens, which both score alike."""
    packed = ncopy = packed_pairs = ncopy_pairs = scored = 0
    for group in groups:
        p = len(group.prompt)
        packed += p
        packed_pairs += p * (p + 1) // 2
        for response in group.responses:
            r = len(response)
            packed += r
            ncopy += p + r
            scored += r
            packed_pairs += r * p + r * (r + 1) // 2
            ncopy_pairs += (p + r) * (p + r + 1) // 2
    return {"packed_tokens": packed, "ncopy_tokens": ncopy, "packed_pairs": packed_pairs,
            "ncopy_pairs": ncopy_pairs, "scored_tokens": scored}


# Models whose attention layers gate their output with a second half of q_proj.
GATED_ATTENTION_MODELS = ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_next")


def step_flops(config, tokens: int, pairs: int, scored_tokens: int) -> float:
    """Model FLOPs of one step (STEP_FORWARDS forwards) of a transformers decoder config."""
    h, heads, kv_heads, d = config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim
    query_outputs = 2 if config.model_type in GATED_ATTENTION_MODELS else 1
    attention_projections = query_outputs * h * heads * d + 2 * h * kv_heads * d + heads * d * h
    layer_types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
    attention_layers = sum(kind == "full_attention" for kind in layer_types[: config.num_hidden_layers])
    recurrent_layers = config.num_hidden_layers - attention_layers
    mlps = sum(_mlp_parameters(config, layer) for layer in range(config.num_hidden_layers))
    per_token = attention_layers * attention_projections + mlps
    if recurrent_layers:
        per_token += recurrent_layers * _gated_deltanet_multiply_adds(config)
    forward = 2.0 * tokens * per_token
    forward += attention_layers * 4.0 * pairs * heads * d
    forward += 2.0 * scored_tokens * h * config.vocab_size
    return STEP_FORWARDS * forward


def _gated_deltanet_multiply_adds(config) -> int:
    """Multiply-adds per token of one Gated DeltaNet layer (see the module doc)."""
    h, value_heads = config.hidden_size, config.linear_num_value_heads
    key_dim = config.linear_num_key_heads * config.linear_key_head_dim
    value_dim = value_heads * config.linear_value_head_dim
    conv_dim = 2 * key_dim + value_dim
    projections = h * conv_dim + h * value_dim + 2 * h * value_heads + value_dim * h
    convolution = conv_dim * config.linear_conv_kernel_dim
    recurrence = 3 * value_heads * config.linear_key_head_dim * config.linear_value_head_dim
    return projections + convolution + recurrence


def _mlp_parameters(config, layer: int) -> int:
    """Parameters one token multiplies with in decoder layer `layer`'s MLP (see the module doc)."""
    h = config.hidden_size
    experts = getattr(config, "num_experts", 0)
    sparse = (
        experts > 0
        and layer not in (getattr(config, "mlp_only_layers", None) or [])
        and (layer + 1) % getattr(config, "decoder_sparse_step", 1) == 0
    )
    if not sparse:
        return 3 * h * config.intermediate_size
    shared = getattr(config, "shared_expert_intermediate_size", 0)
    shared_expert = 3 * h * shared + h if shared else 0
    return h * experts + config.num_experts_per_tok * 3 * h * config.moe_intermediate_size + shared_expert


def peak_flops(device_name: str) -> float | None:
    """The device's dense bf16 peak FLOP/s, or None when the name is not in PEAK_BF16_FLOPS."""
    return next((flops for key, flops in PEAK_BF16_FLOPS.items() if key in device_name), None)
