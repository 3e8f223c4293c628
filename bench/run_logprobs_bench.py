#!/usr/bin/env python3
"""Benchmark of the log-prob layer: dualkv.response_logprobs_from_hidden at the step benchmark's
shape (one group of P prompt tokens and N ragged responses, Qwen3-8B's hidden size and vocabulary,
bf16), forward alone and forward + backward, against the LM-head GEMMs the layer cannot avoid.

    python3 bench/run_logprobs_bench.py [--prompt-length 8192] [--responses 32]

Timing: CUDA events around each pass, warm-up passes first, the median of the timed ones. The
"GEMMs only" baseline runs the same chunked projections (one per chunk forward; forward +
backward: the forward's, the recomputation's and the two gradient products) with no softmax
work, so the difference is the cost of the log-softmax, entropy and gradient passes.
"""

from __future__ import annotations

import argparse
import statistics

import torch

import dualkv
from dualkv.logprobs import _CHUNK_ELEMENTS
from dualkv.training import synthetic_rollouts


def timed(function, warmup: int, repeats: int) -> float:
    """Median milliseconds of `function` over `repeats` calls after `warmup` untimed ones."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-length", type=int, default=8192)
    parser.add_argument("--responses", type=int, default=32)
    parser.add_argument("--response-length", type=int, nargs=2, default=(131, 2048), metavar=("MIN", "MAX"))
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("run_logprobs_bench.py times CUDA passes; no CUDA device found")
    device = torch.device("cuda")
    torch.manual_seed(0)
    (group,) = synthetic_rollouts(1, args.responses, args.prompt_length, tuple(args.response_length), args.vocab)
    packed = dualkv.pack([group.prompt], [list(group.responses)])
    hidden = torch.randn(packed.num_tokens, args.hidden, device=device, dtype=torch.bfloat16)
    weight = (torch.randn(args.vocab, args.hidden, device=device) / args.hidden**0.5).to(torch.bfloat16)
    hidden.requires_grad_(True)
    weight.requires_grad_(True)
    scored_rows = int(packed.response_mask.sum()) - args.responses + 1  # first tokens share one row
    grad_logprob = torch.randn(args.responses, packed.response_mask.shape[1], device=device)
    grad_entropy = torch.randn_like(grad_logprob)

    def forward():
        with torch.no_grad():
            dualkv.response_logprobs_from_hidden(hidden, weight, packed, return_entropy=True)

    def forward_backward():
        logprob, entropy = dualkv.response_logprobs_from_hidden(hidden, weight, packed, return_entropy=True)
        torch.autograd.backward((logprob, entropy), (grad_logprob, grad_entropy))
        hidden.grad = weight.grad = None

    chunk = max(1, _CHUNK_ELEMENTS // args.vocab)
    rows = torch.arange(scored_rows, device=device)
    weight_grad = torch.zeros(weight.shape, dtype=torch.float32, device=device)

    def gemms(with_backward: bool):
        def run():
            with torch.no_grad():
                for begin in range(0, scored_rows, chunk):
                    h = hidden[rows[begin : begin + chunk]]
                    logits = h @ weight.T
                    if with_backward:
                        logits = h @ weight.T  # the backward's recomputation
                        _ = logits @ weight
                        torch.addmm(weight_grad, logits.T, h, out_dtype=torch.float32, out=weight_grad)

        return run

    results = {
        "forward": (timed(forward, args.warmup, args.repeats), timed(gemms(False), args.warmup, args.repeats)),
        "forward + backward": (
            timed(forward_backward, args.warmup, args.repeats),
            timed(gemms(True), args.warmup, args.repeats),
        ),
    }
    print(f"{torch.cuda.get_device_name(device)}; {packed.num_tokens} packed tokens, {scored_rows} scored rows, "
          f"vocab {args.vocab}, hidden {args.hidden}, bf16; {args.repeats} timed passes, median")
    print(f"{'pass':20s} {'log-prob layer ms':>18s} {'GEMMs only ms':>14s} {'difference ms':>14s} {'ratio':>6s}")
    for name, (total, gemm) in results.items():
        print(f"{name:20s} {total:18.1f} {gemm:14.1f} {total - gemm:14.1f} {total / gemm:6.2f}")


if __name__ == "__main__":
    main()
