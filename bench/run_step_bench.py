#!/usr/bin/env python3
"""Step benchmark: the compute of a GRPO/DAPO policy-update step on packed batches (dualkv) against
the same step on the N-copy batch with PyTorch's FlashAttention varlen (flash_ncopy, padding-free as
veRL runs it) or FlashAttention-4's (fa4_ncopy, head_dim 256 on Hopper), and on the packed batch
with FlexAttention, its Triton backend (flex_packed) and its FlashAttention-4 backend (flex_fa4);
the FA4 methods need flash_attn.cute (bench/install_fa4_wheels.sh). Random weights; ragged
responses. Hybrid models (--model qwen3.5-9b, qwen3.5-35b-a3b, tiny-qwen3.5, ...) run their Gated
DeltaNet layers on flash-linear-attention on CUDA (pip install 'dualkv[hybrid]'): on the N-copy
stream one varlen call per layer over the rows, as veRL runs them, on the packed stream with each
prompt's state handed to its responses; the kernels are autotuned on a small input first.

    python3 bench/run_step_bench.py                                     # 1 GPU, the issue's grid
    torchrun --nproc-per-node 2 bench/run_step_bench.py                 # 2 GPUs, FSDP2
    torchrun --nproc-per-node 4 bench/run_step_bench.py --model qwen3-30b-a3b   # MoE (Qwen3-30B-A3B)
    torchrun --nproc-per-node 4 bench/run_step_bench.py --sp 4                  # Ulysses SP over 4 GPUs
    python3 bench/run_step_bench.py --device cpu --model tiny-qwen3 --prompt-lengths 32 \\
        --responses 2 3 --response-length 3 9 --max-fit 8               # the code path on a CPU

A step, per data-parallel rank: --groups prompt groups of N responses in micro-batches of
--micro-batch responses (default N); old log-probs (forward only), then per micro-batch log-probs,
DAPO loss and backward, gradients reduce-scattered per micro-batch and accumulated sharded (held
unsharded until the last micro-batch instead, Qwen3-30B-A3B's gradients would not fit). Model in --dtype for parameters
and gradients alike (no fp32 master copy, no optimizer step: both are the same for every method
and would not fit Qwen3-8B on one GPU), activation checkpointing on, FSDP2 over all ranks.
--sp W: Ulysses sequence parallelism over groups of W adjacent ranks, which hold the same groups
(seeded by the data-parallel rank) and each run its 1/W of every micro-batch's stream, packed or
N-copy (dualkv.distributed.shard_sequence: the N-copy stream is a layout too, one response per
group), the log-probs and loss replicated on the W ranks. Every method's attention runs between
Ulysses' all-to-alls (the baselines' kernels too: bench/step_attention.py). No loss
scaling: FSDP2's mean over the W ranks is the micro-batch's gradient, since each rank's backward
gives W times its share (python/dualkv/training/parallel.py). Token counts, tokens/s and MFU count
each group once; MFU is per GPU over all of them.
Reported per (P, N, method): median step time over --repeats after --warmup steps (FlexAttention
compiles then; --warmup-micro-batches K warms up on the step's first K micro-batches only),
tokens/s (packed and N-copy), peak memory (max over ranks), MFU honest (deduplicated FLOPs) and
effective (N-copy FLOPs) per GPU (bench/step_workload.py), and the largest micro-batch in
responses that fits (the largest power of two up to --max-fit: searched from the timed micro-batch
rounded down to a power of two, doubling while the next size fits or halving until one does, so
that the small sizes, each of which costs compiles and autotuning at new shapes, are probed only
when needed; --max-fit 0 skips the search, one process only: an out-of-memory on one rank would
leave the others waiting in a collective). Each size is probed
with the step itself, on synthetic groups of the same P and N, moved to the device as the timed
step moves them: two micro-batches of that size (the first one's gradients alive during the
second), or one where the step's own batch is a single micro-batch at that size. The search's
several stream lengths would leave FlexAttention compiled for a symbolic length (torch.compile's
automatic dynamic shapes), so the compile caches are cleared after it: the timed steps run kernels
compiled for their own stream lengths, as in a run without the search. The timed step
runs at the smaller of --micro-batch and that fit; in one process, a step that still runs out of
memory is retried at half the size, down to 1 response, the sizes that failed listed under
"oom_micro_batches" (with more processes it stops the run). Methods run in the order --methods
gives them, each (P, N) in turn. Each method's old log-probs on the first configuration are
compared with dualkv's when dualkv ran (max absolute difference, reported, no gate).
Writes step_bench.json, step_bench.txt and, with matplotlib, step_bench.png under --out.
"""

from __future__ import annotations

import argparse
import gc
import pathlib
import platform
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule
from transformers import AutoModelForCausalLM

import dualkv
import dualkv.transformers  # noqa: F401  (registers "dualkv")
from dualkv import losses
from dualkv.distributed import SequenceShard, shard_sequence
from dualkv.recurrent import warm_up_fla
from dualkv.training import PackedPolicy, init_parallelism, shard_policy, synthetic_rollouts
from dualkv.training.fused import fuse_elementwise
from dualkv.training.models import MODEL_CONFIGS, model_config
from dualkv.training.parallel import init_distributed

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import step_report  # noqa: E402
import step_workload as work  # noqa: E402
from wall_clock import GIB, synchronize, time_repeats  # noqa: E402

METHODS = ("dualkv", "flash_ncopy", "fa4_ncopy", "flex_packed", "flex_fa4")
DEFAULT_METHODS = ("dualkv", "flash_ncopy", "flex_packed", "flex_fa4")  # fa4_ncopy on request (--methods)
NCOPY_METHODS = ("flash_ncopy", "fa4_ncopy")
FA4_METHODS = ("fa4_ncopy", "flex_fa4")


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    device = init_distributed(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % args.sp:
        raise ValueError(f"--sp: must divide the number of processes {world}, got {args.sp}")
    parallel = init_parallelism(args.sp, device)
    methods = list(dict.fromkeys(_usable_methods(args.methods, device)))  # in the order given
    started = time.perf_counter()
    policy, config = _build_policy(args, device, parallel)
    _progress(f"{args.model}: model built in {time.perf_counter() - started:.1f} s")
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    peak = args.peak_tflops * 1e12 if args.peak_tflops else work.peak_flops(device_name)
    if peak is None:
        _progress(f"MFU not reported: peak FLOP/s of {device_name!r} unknown (pass --peak-tflops)")
    entries = []
    for p in args.prompt_lengths:
        for n in args.responses:
            # Each data-parallel rank its own groups (the ranks of an SP group share them), all of
            # the same P and N: equal micro-batch counts.
            groups = synthetic_rollouts(args.groups, n, p, tuple(args.response_length), config.vocab_size,
                                        seed=args.seed * 1000 + parallel.dp_rank)
            counts = _global_counts(groups, parallel)
            entry = {"P": p, "N": n, **counts, "methods": {}}
            for method in methods:
                result = _run_method(method, policy, groups, args.micro_batch or n, args, device, world,
                                     sequence_group=parallel.sp_group if args.sp > 1 else None)
                _add_rates(result, counts, config, peak, world)
                entry["methods"][method] = result
                # A run stopped later still shows the methods done.
                _progress(f"P={p} N={n} {method}: {result['status']}, step {result.get('step_s', float('nan')):.3f} s, "
                          f"micro-batch {result.get('micro_batch')}, peak {result.get('peak_memory_gib') or 0:.1f} GiB")
            logprobs = {m: r.pop("logprobs") for m, r in entry["methods"].items() if "logprobs" in r}
            if (p, n) == (args.prompt_lengths[0], args.responses[0]) and "dualkv" in logprobs:
                for method, values in logprobs.items():
                    entry["methods"][method]["logprob_max_abs_diff_vs_dualkv"] = _max_difference(
                        values, logprobs["dualkv"]
                    )
            entries.append(entry)
            _progress(step_report.format_entry(entry))
    report = {
        "device": device_name, "world_size": world, "torch": torch.__version__, "model": args.model,
        "num_hidden_layers": config.num_hidden_layers, "dtype": args.dtype, "groups_per_rank": args.groups,
        "sp": args.sp, "fused_elementwise": args.fuse_elementwise, "flex_shapes": args.flex_shapes,
        "response_length": args.response_length, "peak_flops_per_gpu": peak,
        "skipped_methods": _skipped(args.methods, device), "entries": entries,
    }
    if rank == 0:
        step_report.write_report(report, pathlib.Path(args.out))
    dist.destroy_process_group()
    return report


def _usable_methods(requested: list[str], device: torch.device) -> list[str]:
    for method, reason in _skipped(requested, device).items():
        if dist.get_rank() == 0:
            print(f"{method}: skipped, {reason}", flush=True)
    return [m for m in requested if m not in _skipped(requested, device)]


def _skipped(requested: list[str], device: torch.device) -> dict:
    if device.type == "cuda":
        wanted = [m for m in requested if m in FA4_METHODS]
        if not wanted:
            return {}
        import step_attention

        reason = step_attention.fa4_unavailable()
        return {} if reason is None else {m: reason for m in wanted}
    reasons = {"flash_ncopy": "PyTorch's FlashAttention varlen kernel runs on CUDA only",
               "fa4_ncopy": "FlashAttention-4 runs on CUDA only",
               "flex_packed": "FlexAttention's compiled kernels are benchmarked on CUDA only",
               "flex_fa4": "FlexAttention's FlashAttention-4 backend runs on CUDA only"}
    return {m: reasons[m] for m in requested if m in reasons}


def _build_policy(args, device, parallel):
    config = model_config(args.model, **({"num_hidden_layers": args.layers} if args.layers else {}))
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(args.seed)
    with torch.device(device):  # built where it runs: Qwen3-8B's init on a CPU takes minutes
        lm = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv", dtype=dtype)
    if args.fuse_elementwise:  # every method: the layers outside attention are shared
        fuse_elementwise(lm)
    if device.type == "cuda" and "linear_attention" in (getattr(config, "layer_types", None) or []):
        # Autotuned here on a small input, not inside the first (timed or probed) step.
        warm_up_fla(config.linear_num_value_heads, config.linear_key_head_dim, config.linear_value_head_dim,
                    dtype, device)
    policy = shard_policy(PackedPolicy(lm).train(), parallel, param_dtype=None, activation_checkpointing=True)
    return policy, config


def _run_method(method, policy, groups, micro_batch, args, device, world, sequence_group=None) -> dict:
    """The method's largest fitting micro-batch (one process), then its timed step: in one process
    at half the size after an out-of-memory error, down to 1 response. With a `sequence_group`,
    each micro-batch is stepped as this rank's shard of it over that group."""
    attention = {"dualkv": "dualkv"}.get(method)
    if attention is None:
        import step_attention  # registers the baselines; needs a GPU to run

        attention = {"flash_ncopy": step_attention.FLASH_NCOPY, "fa4_ncopy": step_attention.FA4_NCOPY,
                     "flex_packed": step_attention.FLEX_PACKED, "flex_fa4": step_attention.FLEX_FA4}[method]
        if method in ("flex_packed", "flex_fa4"):
            step_attention.set_flex_shapes(args.flex_shapes)
    policy.lm.set_attn_implementation(attention)
    split = work.ncopy_micro_batches if method in NCOPY_METHODS else work.packed_micro_batches
    result = {}
    if world == 1 and args.max_fit > 0:
        result["largest_micro_batch"] = _largest_fit(policy, split, groups, args, device, micro_batch)
        # The search ran several stream lengths, after which torch.compile's automatic dynamic
        # shapes recompile FlexAttention with a symbolic length (0.6 s slower per 36-layer step at
        # P = 8K, N = 32: docs/decisions.md, "Which FlexAttention"). Clearing the compile caches lets the warm-up
        # compile for the timed step's own lengths, as in a run without the search.
        torch._dynamo.reset()
    size = micro_batch
    if result.get("largest_micro_batch", micro_batch) < micro_batch:
        size = result["largest_micro_batch"]
    if size == 0:
        return {**result, "status": "OOM at a micro-batch of 1 response"}
    advantages = _advantages(groups, device)
    result["oom_micro_batches"] = []  # the sizes whose timed step ran out of memory
    while True:
        try:
            micro_batches = [(_rank_input(b.to(device), sequence_group), ids) for b, ids in split(groups, size)]
            times, logprobs = _timed_steps(policy, micro_batches, advantages, args, device)
            break
        except torch.OutOfMemoryError:
            if world > 1:
                # Another rank may already wait in an FSDP collective: fail the whole run (torchrun
                # stops every rank) rather than hang. The 1-GPU run's largest_micro_batch says what fits.
                print(f"{method}: out of memory at a micro-batch of {size} responses; rerun with --methods {method} "
                      "--micro-batch SMALLER", file=sys.stderr, flush=True)
                raise
        # Recovered outside the handler: its traceback holds the failed step's frames and tensors.
        micro_batches = None
        _recover(policy, device)
        result["oom_micro_batches"].append(size)
        if size == 1:
            return {**result, "status": "OOM at a micro-batch of 1 response"}
        print(f"{method}: out of memory at a micro-batch of {size} responses; retrying at {size // 2}", flush=True)
        size //= 2
    seconds = _max_over_ranks(statistics.median(times), device)
    peak = _max_over_ranks(torch.cuda.max_memory_allocated(device) / GIB, device) if device.type == "cuda" else None
    return {**result, "status": "ok", "micro_batch": size, "micro_steps": len(micro_batches), "step_s": seconds,
            "step_s_all": times, "peak_memory_gib": peak, "logprobs": logprobs}


def _timed_steps(policy, micro_batches, advantages: dict, args, device) -> tuple[list[float], dict]:
    """--warmup steps (of the first --warmup-micro-batches micro-batches), then --repeats timed
    ones: their times and the last one's old log-probs. Peak memory counts from after the warmup."""
    started = time.perf_counter()
    for _ in range(args.warmup):
        _step(policy, micro_batches[: args.warmup_micro_batches], advantages)
    if args.warmup:
        synchronize(device)
        _progress(f"warm-up: {args.warmup} step(s) in {time.perf_counter() - started:.1f} s; "
                  f"timing {args.repeats} of {len(micro_batches)} micro-batch(es)")
    times, logprobs, _ = time_repeats(lambda: _step(policy, micro_batches, advantages), args.repeats, device)
    return times, logprobs[-1]


def _progress(message: str) -> None:
    """A line from the first process, flushed at once: a run stopped by a time limit still shows
    how far it got and what each phase cost (a new machine's first run compiles and autotunes)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)


def _rank_input(batch: dualkv.PackedBatch, sequence_group) -> dualkv.PackedBatch | SequenceShard:
    """What this rank steps of a micro-batch: all of it, or its shard over `sequence_group`."""
    return batch if sequence_group is None else shard_sequence(batch, sequence_group)


def _step(policy, micro_batches, advantages: dict) -> dict:
    """One step's compute (see the module doc) on (PackedBatch or SequenceShard, response ids)
    pairs; returns each response's old log-probs, detached."""
    with torch.no_grad():
        old = [policy(batch)[0] for batch, _ in micro_batches]
    masks = [_packed(batch).response_mask for batch, _ in micro_batches]
    for index, (batch, ids) in enumerate(micro_batches):
        logprobs, _ = policy(batch)  # under SP: every response's, on every rank of the group
        loss = losses.policy_loss(
            logprobs, old[index], torch.stack([advantages[i] for i in ids]), masks[index],
            clip_low=0.2, clip_high=0.28, aggregation="token-mean",
        )
        (loss / len(micro_batches)).backward()
    policy.zero_grad(set_to_none=True)
    return {
        rid: row[mask]
        for (_, ids), rows, response_mask in zip(micro_batches, old, masks)
        for rid, row, mask in zip(ids, rows, response_mask)
    }


def _packed(batch: dualkv.PackedBatch | SequenceShard) -> dualkv.PackedBatch:
    """The whole micro-batch (a shard keeps it: its response layout is global)."""
    return batch.packed if isinstance(batch, SequenceShard) else batch


def _largest_fit(policy, split, groups, args, device, start: int) -> int:
    """The largest power of two up to --max-fit whose step runs, 0 when even one response does not fit:
    from `start` rounded down to a power of two, doubling while the next size fits, or halving until
    a size fits (memory grows with the size). Each size runs _step as the timed step runs it, on
    micro-batches moved to the device up front: two of that size from a synthetic pool of groups
    like `groups` (so the first one's gradients are alive during the second's forward and backward),
    or one when `groups` at that size make a single micro-batch (a step with no gradient
    accumulation)."""
    n = len(groups[0].responses)
    # Enough groups for two micro-batches of --max-fit responses: ceil(2 size / N) groups split into
    # at least two micro-batches of `size` in either stream (packed: one group already does when size < N).
    pool = synthetic_rollouts(
        -(-2 * args.max_fit // n), n, len(groups[0].prompt), tuple(args.response_length),
        policy.lm.config.vocab_size, seed=args.seed + 1,
    )
    advantages = _advantages(pool, device)

    def fits(size: int) -> bool:
        count = min(2, len(split(groups, size)))  # the timed step's micro-batches at this size, up to 2
        needed = pool[: -(-count * size // n)]  # just the groups those micro-batches take
        ran = True
        try:
            batches = [(b.to(device), ids) for b, ids in split(needed, size)[:count]]
            _step(policy, batches, advantages)
            synchronize(device)
        except torch.OutOfMemoryError:
            ran = False
        batches = None
        if ran:
            _free(device)
        else:
            _recover(policy, device)  # outside the handler: its traceback holds the step's tensors
        return ran

    size = 1 << (min(start, args.max_fit).bit_length() - 1)
    if fits(size):
        while 2 * size <= args.max_fit and fits(2 * size):
            size *= 2
        return size
    while size > 1:
        size //= 2
        if fits(size):
            return size
    return 0


def _advantages(groups, device) -> dict:
    """GRPO's group-normalised advantage of every response, by (group, response)."""
    rewards = torch.tensor([r for g in groups for r in g.rewards])
    group_of = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor([len(g.rewards) for g in groups]))
    flat = losses.group_advantages(rewards, group_of).to(device)
    ids = [(g, i) for g, group in enumerate(groups) for i in range(len(group.responses))]
    return dict(zip(ids, flat))


def _recover(policy, device) -> None:
    """After an out-of-memory error: drop gradients, reshard what FSDP had gathered, free memory."""
    policy.zero_grad(set_to_none=True)
    for module in policy.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    _free(device)


def _free(device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _max_over_ranks(value: float, device) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor)


def _global_counts(groups, parallel) -> dict:
    """batch_counts summed over the data-parallel ranks (each group once, not once per SP rank):
    the whole step's batch."""
    counts = work.batch_counts(groups)
    tensor = torch.tensor(list(counts.values()), dtype=torch.float64, device=parallel.device)
    dist.all_reduce(tensor, group=parallel.dp_group)
    return {key: int(value) for key, value in zip(counts, tensor.tolist())}


def _max_difference(a: dict, b: dict) -> float:
    return max(float((a[key].float() - b[key].float()).abs().max()) for key in b)


def _add_rates(result: dict, counts: dict, config, peak: float | None, world: int) -> None:
    if result.get("status") != "ok":
        return
    seconds = result["step_s"]
    result["packed_tokens_per_s"] = counts["packed_tokens"] / seconds
    result["ncopy_tokens_per_s"] = counts["ncopy_tokens"] / seconds
    if peak is not None:
        honest = work.step_flops(config, counts["packed_tokens"], counts["packed_pairs"], counts["scored_tokens"])
        effective = work.step_flops(config, counts["ncopy_tokens"], counts["ncopy_pairs"], counts["scored_tokens"])
        result["mfu_honest"] = honest / seconds / (peak * world)
        result["mfu_effective"] = effective / seconds / (peak * world)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen3-8b", choices=sorted(MODEL_CONFIGS), help="random weights")
    parser.add_argument("--layers", type=int, help="override the model's number of decoder layers")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when usable")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--prompt-lengths", type=int, nargs="+", default=[8192, 16384], metavar="P")
    parser.add_argument("--responses", type=int, nargs="+", default=[8, 16, 32], metavar="N")
    parser.add_argument("--response-length", type=int, nargs=2, default=[131, 2048], metavar=("MIN", "MAX"))
    parser.add_argument("--groups", type=int, default=1,
                        help="prompt groups per data-parallel rank and step, shared by an SP group's ranks "
                             "(default 1)")
    parser.add_argument("--micro-batch", type=int, help="responses per micro-batch (default N: one group)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(DEFAULT_METHODS))
    parser.add_argument("--sp", type=int, default=1,
                        help="Ulysses sequence-parallel group size, dividing the number of processes (default 1; "
                             "every method)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--warmup-micro-batches", type=int,
                        help="a warm-up step runs only the step's first K micro-batches (default: all): the "
                             "same kernels and shapes, for steps too long to run twice")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-fit", type=int, default=256,
                        help="largest micro-batch tried (responses); 0: no search, the step runs at --micro-batch")
    parser.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (default: by its name)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fuse-elementwise", action="store_true",
                        help="RMSNorm, the gated MLP's activation and RoPE as compiled kernels, for every method "
                             "(dualkv.training.fused)")
    parser.add_argument("--flex-shapes", choices=("auto", "dynamic"), default="auto",
                        help="FlexAttention compiled for the timed step's stream lengths (auto: torch.compile's "
                             "default, a symbolic length only once a step runs two lengths) or for a symbolic "
                             "length (dynamic: what a trainer whose stream length changes every step runs)")
    parser.add_argument("--out", default="build/step-bench", help="folder for the JSON, table and plot")
    args = parser.parse_args(argv)
    for name in ("groups", "repeats", "layers", "micro_batch", "sp", "warmup_micro_batches"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')}: must be >= 1, got {value}")
    if args.max_fit < 0:
        parser.error(f"--max-fit: must be >= 0, got {args.max_fit}")
    if min(args.prompt_lengths) < 1 or min(args.responses) < 1:
        parser.error("--prompt-lengths and --responses: every value must be >= 1")
    if not 1 <= args.response_length[0] <= args.response_length[1]:
        parser.error(f"--response-length: expected 1 <= MIN <= MAX, got {args.response_length}")
    if args.warmup < 0:
        parser.error(f"--warmup: must be >= 0, got {args.warmup}")
    return args


if __name__ == "__main__":
    main()
