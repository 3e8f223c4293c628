#!/usr/bin/env python3
"""Every causal-LM architecture of the installed transformers, packed against its N-copy batch.

For each model type in transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES: a tiny random
configuration (fp32, CPU) built with attn_implementation="dualkv" runs a packed batch (two groups,
ragged responses) the way a user calls it, and the same weights with attn_implementation="eager"
run each [prompt; response] row alone. Each architecture is classified:

  equal      packed logits equal the N-copy ones (every row within TOLERANCE of the logits' scale)
  refused    dualkv refused the model with an error (the message is recorded)
  skipped    no comparison possible, with why (encoder-decoder, needs a package, no tiny config, ...)
  DIFFERENT  packed logits differ from the N-copy ones and nothing was refused: a silent error
  error      dualkv's side failed with an error that is not a clear refusal

Prints one line per architecture and the counts; --markdown writes the table, --json the records.
Exit status 1 if any architecture is DIFFERENT or error.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import signal
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass

STATUSES = ("equal", "refused", "skipped", "DIFFERENT", "error")
TOLERANCE = 1e-4  # relative to the largest N-copy logit; fp32 differences are ~1e-6, leaks 1e-3 and up
PROMPTS = (5, 3)
RESPONSES = ((4, 1, 3), (2, 4))
VOCAB = 128
SEED = 0

# Sizes every tiny configuration gets, under each name transformers configurations use for them;
# only the names a configuration class already has are set.
_SIZES = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "n_embd": 64,
    "d_model": 64,
    "num_hidden_layers": 4,
    "n_layer": 4,
    "num_layers": 4,
    "n_layers": 4,
    "num_attention_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "num_heads": 4,
    "num_key_value_heads": 2,
    "num_kv_heads": 2,
    "head_dim": 16,  # not for multi-head latent attention, whose head_dim is its rope part
    "rotary_dim": 8,
    "intermediate_size": 96,
    "ffn_hidden_size": 96,
    "n_inner": 96,
    "ffn_dim": 96,
    "d_ff": 96,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "expert_intermediate_size": 32,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_topk": 2,
    "top_k": 2,
    "n_group": 1,
    "topk_group": 1,
    "max_position_embeddings": 256,
    "n_positions": 256,
    "n_ctx": 256,
    "max_seq_len": 256,
    "sliding_window": 32,  # longer than every path of the batch: exact, and must run
    "attention_window": 32,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "linear_num_value_heads": 2,
    "linear_num_key_heads": 2,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "state_size": 8,
    "ssm_state_size": 8,
    "mamba_d_state": 8,
    "mamba_n_heads": 8,
    "mamba_d_head": 16,
    "mamba_head_dim": 16,
    "mamba_expand": 2,
    "n_groups": 1,
    "mamba_n_groups": 1,
    "mamba_d_ssm": 128,
    "n_shared_experts": 1,
    "time_step_rank": 8,
    "chunk_size": 8,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "attn_pdrop": 0.0,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "dropout": 0.0,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


# Lists naming each layer's kind: a tiny configuration cycles through every kind its defaults
# name, so that a hybrid model keeps each of its layer kinds in four layers.
_LAYER_KIND_LISTS = ("layer_types", "layers_block_type", "block_types", "mlp_layer_types")
# Layer kinds the defaults do not show (their defaults build one kind only).
_LAYER_KINDS = {
    "lfm2": {"layer_types": ["conv", "full_attention", "conv", "full_attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention", "conv", "full_attention"]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "zamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "zamba2": {"hybrid_layer_ids": [1, 3]},
    "bamba": {"attn_layer_indices": [1, 3]},
}
# Sizes a model family ties together differently from the rest.
_FAMILY_SIZES = {
    "mamba2": {"num_heads": 8},  # hidden_size * expand = num_heads * head_dim
    "gpt_neo": {"attention_types": [[["global", "local"], 2]]},
    "zaya": {"num_experts_per_tok": 1},
    "gemma3n_text": {"num_kv_shared_layers": 0},
}


# Architectures this sweep does not shrink, with why.
_NOT_BUILT = {
    "blt": "its byte-level sub-models (patcher, local encoder and decoder, 500k-entry hash embeddings) are not "
    "made tiny by this sweep",
}


@dataclass
class Outcome:
    model_type: str
    status: str  # equal, refused, skipped, DIFFERENT, error
    detail: str = ""
    difference: float | None = None
    seconds: float = 0.0


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: int):
    def expire(signum, frame):
        raise _Timeout(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def tiny_config(model_type: str):
    """The configuration class's defaults with every size it names in _SIZES made tiny."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    defaults = config_class()
    text_defaults = defaults.get_text_config()
    sizes = {key: value for key, value in _SIZES.items() if _has(text_defaults, key)}
    layers = next((sizes[key] for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers") if key in sizes), 4)
    for key in _LAYER_KIND_LISTS:
        kinds = list(dict.fromkeys(vars(text_defaults).get(key) or []))  # stored, not derived, lists
        if kinds:
            sizes[key] = [kinds[i % len(kinds)] for i in range(layers)]
    if _has(text_defaults, "qk_rope_head_dim"):  # multi-head latent attention: one kv head per query head
        sizes.pop("head_dim", None)
        sizes["num_key_value_heads"] = sizes["num_attention_heads"]
    if _has(text_defaults, "is_decoder") and not getattr(defaults, "is_encoder_decoder", False):
        sizes["is_decoder"] = True  # how a causal LM of an encoder family runs
    sizes.update(_LAYER_KINDS.get(model_type, {}))
    sizes.update(_FAMILY_SIZES.get(model_type, {}))
    if text_defaults is defaults:
        config = config_class(**sizes)
    else:  # a composite configuration: the text model's sizes go into its sub-configuration
        key = next(name for name, sub in vars(defaults).items() if sub is text_defaults)
        config = config_class(**{key: type(text_defaults)(**sizes).to_dict()})
    _fit_special_ids(config.get_text_config())
    return config


def _has(config, key: str) -> bool:
    return key in vars(config) or key in getattr(config, "attribute_map", {})


def _fit_special_ids(config) -> None:
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= VOCAB:
            setattr(config, name, min(value, VOCAB - 1) if name != "pad_token_id" else 0)


def sweep_one(model_type: str, time_limit: int = 120) -> Outcome:
    start = time.perf_counter()
    try:
        with _time_limit(time_limit):
            outcome = _compare(model_type)
    except _Timeout as timeout:
        outcome = Outcome(model_type, "skipped", f"timed out: {timeout}")
    outcome.seconds = time.perf_counter() - start
    return outcome


def _compare(model_type: str) -> Outcome:
    import torch
    from transformers import AutoModelForCausalLM

    import dualkv
    import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
    from dualkv.token_mixing import UnsupportedModelError

    if model_type in _NOT_BUILT:
        return Outcome(model_type, "skipped", _NOT_BUILT[model_type])
    try:
        config = tiny_config(model_type)
    except Exception as error:
        return Outcome(model_type, "skipped", f"no tiny configuration: {_one_line(error)}")
    if getattr(config, "is_encoder_decoder", False):
        return Outcome(model_type, "skipped", "encoder-decoder (dualkv packs decoder-only models)")

    torch.manual_seed(SEED)
    try:
        reference = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager")
    except ImportError as error:
        return Outcome(model_type, "skipped", f"needs a package: {_one_line(error)}")
    except Exception as error:
        return Outcome(model_type, "skipped", f"the N-copy reference cannot be built: {_one_line(error)}")
    reference.eval()
    generator = torch.Generator().manual_seed(SEED)
    prompts = [torch.randint(3, VOCAB, (p,), generator=generator).tolist() for p in PROMPTS]
    responses = [[torch.randint(3, VOCAB, (r,), generator=generator).tolist() for r in group] for group in RESPONSES]
    packed = dualkv.pack(prompts, responses)

    try:
        with torch.no_grad():
            expected = _ncopy_logits(reference, prompts, responses)
    except Exception as error:
        return Outcome(model_type, "skipped", f"the N-copy reference fails: {_one_line(error)}")

    try:
        model = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="dualkv")
        model.load_state_dict(reference.state_dict())
        model.eval()
        with torch.no_grad():
            logits = model(
                input_ids=packed.input_ids,
                position_ids=packed.position_ids,
                dualkv_layout=packed.layout,
                use_cache=False,
            ).logits
    except (UnsupportedModelError, ValueError, TypeError) as error:
        status = "refused" if _is_dualkv_refusal(error) else "error"
        return Outcome(model_type, status, _one_line(error, limit=None if status == "refused" else 400))
    except Exception as error:
        return Outcome(model_type, "error", f"{type(error).__name__}: {_one_line(error)}")

    got = logits[0].float()
    scale = float(expected.abs().max())
    difference = float((got - expected).abs().max()) / max(scale, 1e-30)
    if math.isfinite(difference) and difference <= TOLERANCE:
        return Outcome(model_type, "equal", "", difference)
    return Outcome(model_type, "DIFFERENT", "packed logits differ from the N-copy logits", difference)


def _ncopy_logits(model, prompts, responses):
    """(T, vocab) logits in packed order: each prompt's rows from its first [prompt; response] row,
    each response's rows from its own row, every row run alone (no padding)."""
    import torch

    rows = []
    for prompt, group in zip(prompts, responses):
        for index, response in enumerate(group):
            ids = torch.tensor([prompt + response])
            out = model(input_ids=ids, use_cache=False).logits[0].float()
            rows.append(out if index == 0 else out[len(prompt) :])
    return torch.cat(rows)


def _is_dualkv_refusal(error: BaseException) -> bool:
    """dualkv's refusals name the argument or the layer: raised from the dualkv package."""
    from dualkv.token_mixing import UnsupportedModelError, _raised_by_dualkv

    return isinstance(error, UnsupportedModelError) or _raised_by_dualkv(error)


def _one_line(error: BaseException, limit: int | None = 300) -> str:
    text = " ".join(str(error).split())
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="MODEL_TYPE", help="sweep these model types only")
    parser.add_argument("--json", metavar="FILE", help="write the records as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="write the per-architecture table as markdown")
    parser.add_argument("--time-limit", type=int, default=120, metavar="S", help="seconds per architecture")
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore")
    import torch
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    model_types = args.only or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    unknown = sorted(set(model_types) - set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))
    if unknown:
        parser.error(f"--only: not causal-LM model types of this transformers: {unknown}")
    outcomes = []
    for model_type in model_types:
        try:
            outcome = sweep_one(model_type, args.time_limit)
        except Exception as error:  # the sweep's own failure on one model must not end the sweep
            outcome = Outcome(model_type, "error", f"sweep failed: {type(error).__name__}: {_one_line(error)}")
            traceback.print_exc()
        outcomes.append(outcome)
        difference = "" if outcome.difference is None else f" ({outcome.difference:.1e})"
        print(f"{model_type:<28} {outcome.seconds:5.1f}s {outcome.status}{difference} {outcome.detail}", flush=True)
    counts = {status: sum(o.status == status for o in outcomes) for status in STATUSES}
    print("counts: " + ", ".join(f"{status} {count}" for status, count in counts.items()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump([asdict(o) for o in outcomes], file, indent=1)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as file:
            file.write(markdown_table(outcomes))
    return 1 if counts["DIFFERENT"] or counts["error"] else 0


def markdown_table(outcomes: list[Outcome]) -> str:
    lines = ["| model type | result | detail |", "|---|---|---|"]
    for o in outcomes:
        detail = o.detail.replace("|", "\\|")
        lines.append(f"| {o.model_type} | {o.status} | {detail} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
