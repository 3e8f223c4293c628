"""A tiny random Qwen3 (or hybrid Qwen3.5), a word-level tokenizer built in memory (no download) and
GRPOTrainer / DualKVGRPOTrainer pairs on identical weights, for the TRL integration tests."""

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3_5TextConfig, Qwen3Config

from dualkv import check

VOCAB = 64
PAD, EOS = 0, 1
WORDS = [f"w{i}" for i in range(VOCAB)]


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {word: i for i, word in enumerate(WORDS)}
    vocab["<pad>"], vocab["<eos>"] = PAD, EOS
    vocab = {word: i for word, i in vocab.items() if word not in ("w0", "w1")}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")


# Gated DeltaNet, then gated attention: the small Qwen3.5 of dualkv's self-check.
_HYBRID = {name: value for name, value in check.MODELS["qwen3.5"][2].items() if name != "num_hidden_layers"}


def tiny_qwen3(seed: int = 0, attention: str = "sdpa", head_dim: int = 8, hybrid: bool = False):
    """head_dim 8 for CPU tests; the CUDA kernels need 64 or 128. hybrid: a Qwen3.5 of the same
    size (a Gated DeltaNet layer, then a gated-attention layer)."""
    config_class, extra = (Qwen3_5TextConfig, _HYBRID) if hybrid else (Qwen3Config, {})
    config = config_class(
        **extra,
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=128,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, attn_implementation=attention, dtype=torch.float32)


def prompts_dataset(prompts: list[str]):
    from datasets import Dataset  # a trl dependency: imported here so tiny_qwen3 needs only transformers

    return Dataset.from_dict({"prompt": prompts})


def length_reward(completions, **kwargs):
    """Prefers shorter completions, so rewards differ inside a group and advantages are non-zero."""
    return [-float(len(c.split())) for c in completions]


def trainer_pair(
    tmp_path,
    config_overrides: dict | None = None,
    prompts: list[str] | None = None,
    seed: int = 0,
    head_dim: int = 8,
    hybrid: bool = False,
    **trainer_kwargs,
):
    """(plain GRPOTrainer, DualKVGRPOTrainer) over two copies of one tiny model."""
    from trl import GRPOConfig, GRPOTrainer

    from dualkv.integrations.trl import DualKVGRPOTrainer

    settings = dict(
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        learning_rate=1e-2,
        beta=0.04,
        temperature=0.7,  # not 1: the packed head must divide by the same temperature
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        seed=seed,
        gradient_checkpointing=False,
    )
    settings.update(config_overrides or {})
    prompts = prompts or ["w2 w3 w4", "w5 w6", "w7 w8 w9 w10", "w11"]
    # Saved, not passed as an object: GRPOTrainer builds the reference model from the path.
    path = tmp_path / "tiny-qwen3"
    tiny_qwen3(seed, head_dim=head_dim, hybrid=hybrid).save_pretrained(path)
    settings.setdefault("model_init_kwargs", {"dtype": torch.float32, "attn_implementation": "sdpa"})
    trainers = []
    for cls, name in ((GRPOTrainer, "plain"), (DualKVGRPOTrainer, "dualkv")):
        trainers.append(
            cls(
                model=str(path),
                reward_funcs=length_reward,
                args=GRPOConfig(output_dir=str(tmp_path / name), **settings),
                train_dataset=prompts_dataset(prompts),
                processing_class=tokenizer(),
                **trainer_kwargs,
            )
        )
    return tuple(trainers)
