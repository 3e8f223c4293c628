#!/usr/bin/env python3
"""Gated DeltaNet's token mixing (the causal convolution and the gated delta rule, forward and
backward) on the packed stream, with each prompt's state handed to its responses, against the same
layer on the N-copy rows (one varlen call over every [prompt; response] row, as veRL runs it).
Both through dualkv.recurrent: flash-linear-attention's kernels on CUDA, the PyTorch recurrence on
a CPU. The projections around them are per token and cost what the token counts say.

    python3 bench/run_recurrent_bench.py                          # one GPU: Qwen3.5's layer, bf16
    python3 bench/run_recurrent_bench.py --device cpu --heads 2 --key-dim 16 --value-dim 16 \\
        --prompt-lengths 24 --responses 3 --response-length 2 9   # the code path on a CPU

Shapes (defaults: Qwen3.5's, transformers' defaults): --heads value heads (q and k repeated to
them, as the model does), --key-dim and --value-dim per head, convolution channels 2 heads
key-dim + heads value-dim (the model's q, k, v), width 4. Per (P, N): one group, N responses of
lengths uniform in --response-length (seeded), bf16 inputs (fp32 log-decay, as the model passes).
--ncopy-micro-batch K runs the N-copy rows as calls of K rows each, as a trainer's micro-batches
would (times summed): one call over all rows slows down faster than its tokens grow above about
150K tokens on an H200, and runs out of memory at 560K.
Reported: median forward+backward milliseconds over --repeats after a warm-up (on CUDA the kernels
are autotuned on a small input first, dualkv.recurrent.warm_up_fla), tokens per second of the
N-copy batch, the speed-up, and peak memory on CUDA; a stream that does not fit in one call is
reported as out of memory (status) and the run goes on. Writes recurrent_bench.json under --out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

import dualkv
from dualkv.recurrent import RecurrentPlan, causal_conv1d, gated_delta_rule, warm_up_fla
from dualkv.training import synthetic_rollouts

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from wall_clock import time_repeats  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = DTYPES[args.dtype]
    if device.type == "cuda":
        warm_up_fla(args.heads, args.key_dim, args.value_dim, dtype, device)
    entries = []
    for p in args.prompt_lengths:
        for n in args.responses:
            (group,) = synthetic_rollouts(1, n, p, tuple(args.response_length), vocab_size=2, seed=args.seed)
            lengths = [len(r) for r in group.responses]
            packed = dualkv.Layout.from_lengths([p], [lengths])
            rows_per_call = args.ncopy_micro_batch or n
            ncopy_calls = [
                dualkv.Layout.from_lengths([p] * len(chunk), [[r] for r in chunk])
                for chunk in (lengths[i : i + rows_per_call] for i in range(0, n, rows_per_call))
            ]
            ncopy_tokens = sum(layout.num_tokens for layout in ncopy_calls)
            entry = {"P": p, "N": n, "packed_tokens": packed.num_tokens, "ncopy_tokens": ncopy_tokens}
            for name, layouts in (("packed", [packed]), ("ncopy", ncopy_calls)):
                entry[name] = _time_calls(layouts, args, dtype, device)
                if "ms" in entry[name]:
                    entry[name]["ncopy_tokens_per_s"] = ncopy_tokens / (entry[name]["ms"] / 1e3)
            timed = "ms" in entry["packed"] and "ms" in entry["ncopy"]
            entry["speedup"] = entry["ncopy"]["ms"] / entry["packed"]["ms"] if timed else None
            entries.append(entry)
            print(_format(entry), flush=True)
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "dtype": args.dtype, "heads": args.heads, "key_dim": args.key_dim,
              "value_dim": args.value_dim, "response_length": args.response_length,
              "ncopy_micro_batch": args.ncopy_micro_batch, "entries": entries}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "recurrent_bench.json").write_text(json.dumps(report, indent=1))
    return report


def _time_calls(layouts, args, dtype, device) -> dict:
    """The streams of `layouts` one call each, as a trainer's micro-batches run them: the sum of
    their medians, the largest peak, or the first stream's out-of-memory status."""
    results = []
    for layout in layouts:
        result = _time_or_out_of_memory(RecurrentPlan.from_layout(layout, device), args, dtype, device)
        if "ms" not in result:
            return result
        results.append(result)
    return {"status": "ok", "calls": len(results), "ms": sum(r["ms"] for r in results),
            "ms_per_call": [r["ms"] for r in results],
            "peak_memory_gib": max(r["peak_memory_gib"] for r in results)}


def _time_or_out_of_memory(plan: RecurrentPlan, args, dtype, device) -> dict:
    """_time_layer's result, or {"status": "out of memory"} when one call on the whole stream does not
    fit (the N-copy stream at the largest shapes: --ncopy-micro-batch splits it)."""
    try:
        return {"status": "ok", **_time_layer(plan, args, dtype, device)}
    except torch.OutOfMemoryError:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return {"status": "out of memory"}


def _time_layer(plan: RecurrentPlan, args, dtype, device) -> dict:
    """Forward and backward of the convolution and the recurrence on `plan`'s stream: milliseconds
    (median) and peak memory."""
    tokens, heads = plan.num_tokens, args.heads
    channels = heads * (2 * args.key_dim + args.value_dim)
    generator = torch.Generator(device=device).manual_seed(args.seed)

    def draw(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=generator, device=device)).to(dtype).requires_grad_()

    x = draw(channels, tokens)
    weight = draw(channels, 4, scale=0.5)
    a = torch.randn(tokens, heads, generator=generator, device=device).requires_grad_()
    b = draw(tokens, heads)
    grad = torch.randn(tokens, heads, args.value_dim, generator=generator, device=device).to(dtype)

    def step():
        mixed = causal_conv1d(x, weight, plan, activation=F.silu).T
        q, k, v = mixed.split([heads * args.key_dim, heads * args.key_dim, heads * args.value_dim], dim=1)
        out = gated_delta_rule(
            q.unflatten(1, (heads, args.key_dim)), k.unflatten(1, (heads, args.key_dim)),
            v.unflatten(1, (heads, args.value_dim)), F.logsigmoid(a), b.sigmoid(), plan,
        )
        out.backward(grad)

    step()
    seconds, _, peak = time_repeats(step, args.repeats, device)
    times = [s * 1e3 for s in seconds]
    return {"ms": statistics.median(times), "ms_all": times, "peak_memory_gib": peak}


def _format(entry: dict) -> str:
    def time(result):
        return f"{result['ms']:9.2f} ms" if "ms" in result else f"{result['status']:>12}"

    speedup = f"{entry['speedup']:5.2f}x" if entry["speedup"] is not None else "    -"
    return (f"P={entry['P']:>6} N={entry['N']:>3}  packed {time(entry['packed'])}  "
            f"N-copy {time(entry['ncopy'])}  speed-up {speedup}  "
            f"(tokens {entry['packed_tokens']} vs {entry['ncopy_tokens']})")


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--key-dim", type=int, default=128)
    parser.add_argument("--value-dim", type=int, default=128)
    parser.add_argument("--prompt-lengths", type=int, nargs="+", default=[8192, 16384], metavar="P")
    parser.add_argument("--responses", type=int, nargs="+", default=[8, 16, 32], metavar="N")
    parser.add_argument("--response-length", type=int, nargs=2, default=[131, 2048], metavar=("MIN", "MAX"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ncopy-micro-batch", type=int, default=0, metavar="K",
                        help="run the N-copy rows as calls of K responses each, as a trainer's micro-batches "
                        "(default 0: all N rows in one call)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="build/recurrent-bench")
    args = parser.parse_args(argv)
    if not 1 <= args.response_length[0] <= args.response_length[1]:
        parser.error(f"--response-length: expected 1 <= MIN <= MAX, got {args.response_length}")
    if args.ncopy_micro_batch < 0:
        parser.error(f"--ncopy-micro-batch: must be >= 0, got {args.ncopy_micro_batch}")
    for name in ("heads", "key_dim", "value_dim", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: must be >= 1")
    return args


if __name__ == "__main__":
    main()
