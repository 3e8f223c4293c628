"""Named model shapes for runs without a checkpoint (random weights): a tiny Qwen3 that runs in
seconds on a CPU, and Qwen3-8B's architecture for benchmarks. Head dim 64 or 128 keeps both on the
compiled CUDA kernels."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, Qwen3Config

__all__ = ["MODEL_CONFIGS", "build_model"]

MODEL_CONFIGS = {
    "tiny-qwen3": dict(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=32768,
    ),
    # Qwen/Qwen3-8B's config.json.
    "qwen3-8b": dict(
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
    ),
}


def build_model(name_or_path: str, seed: int = 0) -> torch.nn.Module:
    """A causal LM on attn_implementation="dualkv" in fp32 (the master weights): a name of
    MODEL_CONFIGS (random weights from `seed`) or a local transformers checkpoint directory."""
    import dualkv.transformers  # noqa: F401  (registers "dualkv")

    if name_or_path in MODEL_CONFIGS:
        torch.manual_seed(seed)
        config = Qwen3Config(**MODEL_CONFIGS[name_or_path])
        return AutoModelForCausalLM.from_config(config, attn_implementation="dualkv", dtype=torch.float32)
    return AutoModelForCausalLM.from_pretrained(name_or_path, attn_implementation="dualkv", dtype=torch.float32)
