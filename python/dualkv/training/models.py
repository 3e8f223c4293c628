"""Named model shapes for runs without a checkpoint (random weights): tiny Qwen3, Qwen3-MoE and
hybrid (Qwen3.5, Qwen3.5-MoE, Qwen3-Next: Gated DeltaNet and gated attention) models that run in
seconds on a CPU, and Qwen3-8B's, Qwen3-30B-A3B's, Qwen3.5's and Qwen3.5-MoE's architectures for
benchmarks. The tiny models and the Qwen3 ones have head dim 64 or 128, the Qwen3.5 ones 256: all
three are compiled CUDA attention kernels. The hybrid models need flash-linear-attention on CUDA
(pip install 'dualkv[hybrid]')."""

from __future__ import annotations

import torch
from transformers import (
    AutoModelForCausalLM,
    PretrainedConfig,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
    Qwen3Config,
    Qwen3MoeConfig,
    Qwen3NextConfig,
)

__all__ = ["MODEL_CONFIGS", "build_model", "model_config"]

# The tiny hybrid models' shared shape: three Gated DeltaNet layers (two value heads per key head,
# convolution width 4) and one gated-attention layer, the layer pattern of Qwen3.5 and Qwen3-Next.
_TINY_HYBRID = dict(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    linear_conv_kernel_dim=4,
    max_position_embeddings=32768,
)
_TINY_HYBRID_MOE = dict(
    num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64
)

# name -> (transformers config class, its keyword arguments)
MODEL_CONFIGS: dict[str, tuple[type[PretrainedConfig], dict]] = {
    "tiny-qwen3": (Qwen3Config, dict(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=32768,
    )),
    # A sparse MLP in every layer: 2 of 4 experts per token.
    "tiny-qwen3-moe": (Qwen3MoeConfig, dict(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=32768,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        mlp_only_layers=[],
    )),
    "tiny-qwen3.5": (Qwen3_5TextConfig, _TINY_HYBRID),
    "tiny-qwen3.5-moe": (Qwen3_5MoeTextConfig, {**_TINY_HYBRID, **_TINY_HYBRID_MOE}),
    "tiny-qwen3-next": (Qwen3NextConfig, {**_TINY_HYBRID, **_TINY_HYBRID_MOE}),
    # Qwen/Qwen3-8B's config.json.
    "qwen3-8b": (Qwen3Config, dict(
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    )),
    # Qwen/Qwen3-30B-A3B's config.json.
    "qwen3-30b-a3b": (Qwen3MoeConfig, dict(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_experts=128,
        num_experts_per_tok=8,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        max_position_embeddings=40960,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        mlp_only_layers=[],
    )),
    # transformers' Qwen3.5 defaults (about 9B): 32 layers, 3 Gated DeltaNet to 1 gated attention
    # (16 heads, 4 KV heads, head dim 256, a quarter of it rotary), vocabulary 248K.
    "qwen3.5-9b": (Qwen3_5TextConfig, {}),
    # transformers' Qwen3.5-MoE defaults, the 35B-A3B class: 40 layers, 256 experts, 8 per token.
    "qwen3.5-35b-a3b": (Qwen3_5MoeTextConfig, {}),
}


def model_config(name: str, **overrides) -> PretrainedConfig:
    """The transformers config of MODEL_CONFIGS[name], with `overrides` (e.g. num_hidden_layers)."""
    if name not in MODEL_CONFIGS:
        raise ValueError(f"name: expected one of {sorted(MODEL_CONFIGS)}, got {name!r}")
    config_class, settings = MODEL_CONFIGS[name]
    return config_class(**{**settings, **overrides})


def build_model(name_or_path: str, seed: int = 0) -> torch.nn.Module:
    """A causal LM on attn_implementation="dualkv" in fp32 (the master weights): a name of
    MODEL_CONFIGS (random weights from `seed`) or a local transformers checkpoint directory."""
    import dualkv.transformers  # noqa: F401  (registers "dualkv")

    if name_or_path in MODEL_CONFIGS:
        torch.manual_seed(seed)
        config = model_config(name_or_path)
        return AutoModelForCausalLM.from_config(config, attn_implementation="dualkv", dtype=torch.float32)
    return AutoModelForCausalLM.from_pretrained(name_or_path, attn_implementation="dualkv", dtype=torch.float32)
