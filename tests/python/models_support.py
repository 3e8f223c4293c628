"""Tiny random-init decoder models and N-copy rollout batches for the transformers tests."""

import random

import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    Qwen2Config,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
    Qwen3Config,
    Qwen3MoeConfig,
    Qwen3NextConfig,
)

from dualkv import losses

VOCAB = 128
PAD = 0

_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention, as in the real models
    max_position_embeddings=256,
    pad_token_id=PAD,
)

# Hybrid models: Gated DeltaNet layers (conv width 4, so prompts of 1 and 2 tokens are shorter than
# its tail) before a gated-attention layer, as in Qwen3.5 and Qwen3-Next.
_HYBRID = dict(
    _COMMON,
    num_hidden_layers=3,
    layer_types=["linear_attention", "linear_attention", "full_attention"],
    linear_num_key_heads=2,
    linear_num_value_heads=4,  # two value heads per key head, as in the real configs
    linear_key_head_dim=8,
    linear_value_head_dim=12,
    linear_conv_kernel_dim=4,
)
_HYBRID_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32)

CONFIGS = {
    "qwen3": lambda: Qwen3Config(**_COMMON, head_dim=16),
    "qwen3_moe": lambda: Qwen3MoeConfig(
        **_COMMON, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32
    ),
    "llama": lambda: LlamaConfig(**_COMMON),
    "qwen2": lambda: Qwen2Config(**_COMMON),
    "qwen3_5": lambda: Qwen3_5TextConfig(**_HYBRID, head_dim=256),  # the real head dim
    "qwen3_5_moe": lambda: Qwen3_5MoeTextConfig(**_HYBRID, head_dim=16, **_HYBRID_MOE),
    "qwen3_next": lambda: Qwen3NextConfig(**_HYBRID, head_dim=16, **_HYBRID_MOE),
}
HYBRID_MODELS = ("qwen3_5", "qwen3_5_moe", "qwen3_next")


def hybrid_cuda_unavailable() -> str | None:
    """Why the hybrid models' Gated DeltaNet cannot train on this machine's GPU (a skip reason), or
    None when it can: flash-linear-attention installed, and a Triton whose gated backward is right
    on this GPU."""
    from dualkv.recurrent.fla_backend import HybridUnavailable, _import_fla, check_triton_for_backward

    if not torch.cuda.is_available():
        return "no GPU"
    try:
        _import_fla()
        check_triton_for_backward(torch.device("cuda", 0))
    except HybridUnavailable as reason:
        return str(reason)
    return None


def model_pair(name, reference_attention="eager", seed=0):
    """The same random weights twice: one model on "dualkv", one on a transformers attention."""
    torch.manual_seed(seed)
    # One config object each: from_config records the attention implementation in the config.
    reference = AutoModelForCausalLM.from_config(
        CONFIGS[name](), attn_implementation=reference_attention, dtype=torch.float32
    )
    packed = AutoModelForCausalLM.from_config(CONFIGS[name](), attn_implementation="dualkv", dtype=torch.float32)
    packed.load_state_dict(reference.state_dict())
    return packed, reference


def rollouts(seed, shapes):
    """shapes: list of (P, [R_0, ...]); real token ids avoid PAD."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(1, VOCAB) for _ in range(p)] for p, _ in shapes]
    responses = [[[rng.randrange(1, VOCAB) for _ in range(r)] for r in rs] for _, rs in shapes]
    return prompts, responses


def right_padded_rows(prompts, responses):
    """The N-copy batch, one row [prompt; response] per response in group-major order, right padded."""
    rows = [
        (g, prompt + response, len(prompt))
        for g, (prompt, group) in enumerate(zip(prompts, responses))
        for response in group
    ]
    width = max(len(tokens) for _, tokens, _ in rows)
    input_ids = torch.full((len(rows), width), PAD)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    for b, (_, tokens, _) in enumerate(rows):
        input_ids[b, : len(tokens)] = torch.tensor(tokens)
        attention_mask[b, : len(tokens)] = 1
    group_ids = torch.tensor([g for g, _, _ in rows])
    prompt_lengths = torch.tensor([p for _, _, p in rows])
    return input_ids, attention_mask, group_ids, prompt_lengths


def grpo_loss(logprobs, packed, seed):
    """The GRPO loss (clip-higher, per-sequence token means, k3 KL) with rewards, old and reference
    log-probs drawn from `seed` around the given log-probs."""
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.rand(packed.num_responses, generator=gen)
    noise = torch.randn(logprobs.shape, generator=gen)
    advantages = losses.group_advantages(rewards, packed.response_group)
    return losses.policy_loss(
        logprobs,
        logprobs.detach() + 0.1 * noise,
        advantages,
        packed.response_mask,
        clip_low=0.2,
        clip_high=0.28,
        aggregation="seq-mean-token-mean",
        ref_logprobs=logprobs.detach() - 0.05 * noise.abs(),
        kl_coef=0.04,
    )
