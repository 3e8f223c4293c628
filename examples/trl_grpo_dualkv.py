"""GRPO with TRL on packed prompt groups: DualKVGRPOTrainer in place of trl.GRPOTrainer.

    pip install "dualkv[trl]"
    python examples/trl_grpo_dualkv.py                      # a tiny random Qwen3, offline, CPU or GPU
    python examples/trl_grpo_dualkv.py --model Qwen/Qwen3-0.6B --steps 10

Everything but the trainer class is ordinary TRL: generation runs with the model's own attention
(or vLLM), and only the scoring forward passes (policy, old and reference log-probs) run packed.
"""

import argparse
import tempfile

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen3Config
from trl import GRPOConfig

from dualkv.integrations.trl import DualKVGRPOTrainer


def tiny_random_qwen3(directory: str) -> tuple[str, PreTrainedTokenizerFast]:
    """A 2-layer Qwen3 with random weights and a word-level tokenizer over "t0".."t255", saved to
    `directory` (GRPOTrainer builds its reference model from a path)."""
    words = {f"t{i}": i for i in range(2, 256)} | {"<pad>": 0, "<eos>": 1}
    backend = Tokenizer(models.WordLevel(words, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")
    config = Qwen3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, pad_token_id=0, eos_token_id=1, bos_token_id=None,
    )  # fmt: skip
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, tokenizer


def short_answers(completions, **kwargs):
    """Toy reward: shorter completions score higher."""
    return [-float(len(c.split())) for c in completions]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a Hugging Face model id or path (default: a tiny random Qwen3)")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as workdir:
        if args.model:
            model, tokenizer = args.model, AutoTokenizer.from_pretrained(args.model)
            prompts = ["Name a prime number.", "What is 2 + 2?", "Say hello.", "Spell 'cat'."]
        else:
            model, tokenizer = tiny_random_qwen3(f"{workdir}/model")
            prompts = ["t5 t6 t7 t8 t9 t10 t11 t12", "t20 t21 t22", "t30 t31 t32 t33 t34", "t40"]
        config = GRPOConfig(
            output_dir=f"{workdir}/out",
            max_steps=args.steps,
            per_device_train_batch_size=8,
            num_generations=4,  # each prompt's 4 completions share one packed prompt
            max_completion_length=16,
            beta=0.04,  # a reference model, scored packed as well
            learning_rate=1e-5,
            logging_steps=1,
            report_to=[],
            bf16=torch.cuda.is_available(),
            use_cpu=not torch.cuda.is_available(),
            # The attention generation uses; packed scoring switches to dualkv by itself.
            model_init_kwargs={"attn_implementation": "sdpa"},
        )
        trainer = DualKVGRPOTrainer(
            model=model,
            reward_funcs=short_answers,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": prompts * 4}),
            processing_class=tokenizer,
        )
        trainer.train()
        losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
        print("loss per step:", losses)


if __name__ == "__main__":
    main()
