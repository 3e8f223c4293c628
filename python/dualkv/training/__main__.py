"""python -m dualkv.training: GRPO/DAPO policy updates on packed batches, from a rollout file or
synthetic rollouts, with a progress bar and one JSON line of metrics per optimizer step.

    python -m dualkv.training                                    # one process (CPU or GPU)
    torchrun --nproc-per-node 2 -m dualkv.training --sp 2 ...    # FSDP2 over 2 ranks, SP 2
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys

import torch
import torch.distributed as dist
from tqdm import tqdm

from .fused import fuse_elementwise
from .models import MODEL_CONFIGS, build_model
from .parallel import init_distributed, init_parallelism, shard_policy
from .policy import PackedPolicy
from .rollouts import ROLLOUT_SUFFIXES, load_rollouts, synthetic_rollouts
from .step import UpdateConfig, policy_update


def main(argv: list[str] | None = None) -> int:
    """Runs the updates; returns the exit status: 1 if any step was skipped (a non-finite loss or
    gradient norm), so that a run that did not train is never reported as a success."""
    args = _parse(argv)
    device = init_distributed(args.device)
    parallel = init_parallelism(args.sp, device)
    lm = build_model(args.model, seed=args.seed)
    if args.fuse_elementwise:
        fuse_elementwise(lm)
    rollouts = (
        load_rollouts(args.rollouts, vocab_size=lm.get_input_embeddings().num_embeddings)
        if args.rollouts
        else synthetic_rollouts(
            args.groups, args.responses, args.prompt_length, tuple(args.response_length), lm.config.vocab_size, args.seed
        )
    )
    config = (UpdateConfig.grpo if args.loss == "grpo" else UpdateConfig.dapo)(
        args.max_tokens, **({} if args.kl_coef is None else {"kl_coef": args.kl_coef}), max_grad_norm=args.max_grad_norm
    )
    param_dtype = {"bf16": torch.bfloat16, "fp32": None}[args.dtype]
    # The GRPO reference policy is the initial policy, frozen.
    reference = None
    if config.kl_coef != 0.0:
        reference = PackedPolicy(copy.deepcopy(lm).to(device), args.temperature).eval()
        reference = shard_policy(reference, parallel, param_dtype=param_dtype, activation_checkpointing=False)
    policy = PackedPolicy(lm.to(device), args.temperature).train()
    policy = shard_policy(policy, parallel, param_dtype=param_dtype, activation_checkpointing=args.checkpointing)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)

    batches = [rollouts[i : i + args.groups_per_step] for i in range(0, len(rollouts), args.groups_per_step)]
    leader = dist.get_rank() == 0
    log = open(args.metrics_log, "a", encoding="utf-8") if leader and args.metrics_log else None  # noqa: SIM115
    progress = tqdm(total=args.epochs * len(batches), disable=not leader, unit="step", file=sys.stderr)
    skipped = []
    for epoch in range(args.epochs):
        for index, batch in enumerate(batches):
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            metrics = policy_update(policy, optimizer, batch, config, parallel, reference=reference)
            record = {"step": progress.n, "epoch": epoch, "batch": index, "world": dist.get_world_size(),
                      "sp": args.sp, **metrics, **_throughput(metrics, device)}
            if leader:
                line = json.dumps(record)
                print(line, file=log, flush=True) if log else tqdm.write(line, file=sys.stdout)
            progress.set_postfix(loss=f"{metrics['loss']:.4g}", grad_norm=f"{metrics['grad_norm']:.3g}")
            if metrics["skipped"]:
                skipped.append(progress.n)
            progress.update()
    progress.close()
    if log:
        log.close()
    dist.destroy_process_group()
    if skipped:
        if leader:
            print(
                f"python -m dualkv.training: {len(skipped)} of {progress.n} steps were skipped because their loss or "
                f"gradient norm was not finite (steps {skipped[:10]}{' ...' if len(skipped) > 10 else ''}); the policy "
                "was not updated on them",
                file=sys.stderr,
            )
        return 1
    return 0


def _throughput(metrics: dict, device: torch.device) -> dict:
    seconds = metrics["time_s"]
    out = {"packed_tokens_per_s": metrics["packed_tokens"] / seconds, "ncopy_tokens_per_s": metrics["ncopy_tokens"] / seconds}
    if device.type == "cuda":
        out["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return out


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m dualkv.training", description=__doc__.split("\n\n")[0])
    source = parser.add_argument_group("rollouts (a JSONL or parquet file, or synthetic ones)")
    source.add_argument("--rollouts", help="a .jsonl file (one {prompt, responses, rewards} group per line) or a "
                        ".parquet file (columns prompt, responses, rewards; one group per row; needs pyarrow)")
    source.add_argument("--groups", type=int, default=6, help="synthetic: prompt groups (default 6)")
    source.add_argument("--responses", type=int, default=4, help="synthetic: responses per group N (default 4)")
    source.add_argument("--prompt-length", type=int, default=96, help="synthetic: prompt tokens P (default 96)")
    source.add_argument("--response-length", type=int, nargs=2, default=(8, 48), metavar=("MIN", "MAX"),
                        help="synthetic: response lengths, uniform in [MIN, MAX] (default 8 48)")
    model = parser.add_argument_group("model")
    model.add_argument("--model", default="tiny-qwen3",
                       help=f"one of {sorted(MODEL_CONFIGS)} (random weights) or a local checkpoint directory")
    model.add_argument("--seed", type=int, default=0)
    model.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16", help="compute dtype (master weights fp32)")
    model.add_argument("--no-checkpointing", dest="checkpointing", action="store_false",
                       help="disable activation checkpointing of the decoder layers")
    model.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when usable")
    model.add_argument("--fuse-elementwise", action="store_true",
                       help="RMSNorm, the gated MLP's activation and RoPE as compiled kernels (dualkv.training.fused)")
    update = parser.add_argument_group("update")
    update.add_argument("--loss", choices=("grpo", "dapo"), default="grpo")
    update.add_argument("--kl-coef", type=float, help="override the loss's KL coefficient (GRPO 0.04, DAPO 0)")
    update.add_argument("--lr", type=float, default=1e-6)
    update.add_argument("--max-grad-norm", type=float, default=1.0)
    update.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the rollouts")
    update.add_argument("--max-tokens", type=int, default=4096, help="packed tokens per micro-batch (default 4096)")
    update.add_argument("--groups-per-step", type=int, default=2, help="prompt groups per optimizer step (default 2)")
    update.add_argument("--epochs", type=int, default=1, help="passes over the rollouts")
    update.add_argument("--sp", type=int, default=1, help="sequence-parallel degree (divides the world size)")
    parser.add_argument("--metrics-log", help="append the JSON lines to this file instead of printing them")
    args = parser.parse_args(argv)
    if args.groups_per_step < 1 or args.epochs < 1:
        parser.error("--groups-per-step and --epochs must be >= 1")
    if args.kl_coef is not None and not (math.isfinite(args.kl_coef) and args.kl_coef >= 0):
        parser.error(f"--kl-coef: must be finite and >= 0, got {args.kl_coef}")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        parser.error(f"--temperature: must be finite and > 0, got {args.temperature}")
    if not (math.isfinite(args.lr) and args.lr >= 0):
        parser.error(f"--lr: must be finite and >= 0, got {args.lr}")
    if not args.max_grad_norm > 0:  # inf: no clipping
        parser.error(f"--max-grad-norm: must be > 0, got {args.max_grad_norm}")
    # The format follows the suffix; checked here so a typo fails before the model is built.
    if args.rollouts and not args.rollouts.lower().endswith(ROLLOUT_SUFFIXES):
        parser.error(f"--rollouts: expected a file ending in one of {ROLLOUT_SUFFIXES}, got {args.rollouts!r}")
    return args


if __name__ == "__main__":
    sys.exit(main())
