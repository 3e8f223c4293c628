#!/usr/bin/env python3
"""Time dualkv's model check (dualkv.token_mixing.check_token_mixing) on one model shape.

The check runs once per model instance, before its first packed result: one forward and one
backward pass on 11 tokens per packed row, in the model's own dtype and device. This builds the
shape with random weights (bf16 on the GPU by default), runs the check once to pay the attention
operator's first-use self-check, then times the check on a copy of the model.
"""

import argparse
import copy
import time

import torch
from transformers import AutoModelForCausalLM

import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv.token_mixing import check_token_mixing
from dualkv.training.models import MODEL_CONFIGS, model_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen3-8b", choices=sorted(MODEL_CONFIGS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(model_config(args.model), attn_implementation="dualkv", dtype=dtype)
    check_token_mixing(model)  # the first attention call also runs the operator's self-check
    timed = copy.deepcopy(model)
    if args.device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    check_token_mixing(timed)
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"{args.model} ({args.dtype}, {args.device}): model check {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
