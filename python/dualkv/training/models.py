"""Named model shapes for runs without a checkpoint (random weights): tiny Qwen3 and Qwen3-MoE
models that run in seconds on a CPU, and Qwen3-8B's and Qwen3-30B-A3B's architectures for
benchmarks. Head dim 64 or 128 keeps all of them on the compiled CUDA kernels."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig, Qwen3Config, Qwen3MoeConfig

__all__ = ["MODEL_CONFIGS", "build_model", "model_config"]

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
