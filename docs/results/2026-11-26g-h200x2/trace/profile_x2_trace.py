#!/usr/bin/env python3
"""Session 18 one-off: where a multi-GPU step's time goes, per method, under torchrun.

Builds the step benchmark's policy (FSDP2 over every rank, as bench/run_step_bench.py does), one
warm-up step per method, then one step under torch.profiler; rank 0 prints the step's wall time,
the time some kernel runs (union over streams), the time a compute kernel runs, the NCCL-only time
(NCCL kernels running with no compute kernel beside them), the idle time, and per category the
kernel time. It also counts the NCCL kernels that started within 50 us of an attention kernel's
end: kernels that were held back until the attention kernel freed its SMs.

    torchrun --nproc-per-node 2 exp/profile_x2.py --layers 36 --prompt-lengths 8192 --responses 32 \
        --fuse-elementwise --methods dualkv flex_packed
"""

import collections
import os
import subprocess
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run_step_bench as bench  # noqa: E402
import step_workload as work  # noqa: E402
from profile_step import category  # noqa: E402
from dualkv.training import init_parallelism, synthetic_rollouts  # noqa: E402
from dualkv.training.parallel import init_distributed  # noqa: E402


def union(intervals):
    total, end = 0.0, -1e30
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def main() -> None:
    args = bench._parse(sys.argv[1:])
    device = init_distributed(args.device)
    parallel = init_parallelism(1, device)
    policy, config = bench._build_policy(args, device, parallel)
    p, n = args.prompt_lengths[0], args.responses[0]
    groups = synthetic_rollouts(args.groups, n, p, tuple(args.response_length), config.vocab_size,
                                seed=args.seed * 1000 + parallel.dp_rank)
    advantages = bench._advantages(groups, device)
    for method in args.methods:
        attention = {"dualkv": "dualkv"}.get(method)
        if attention is None:
            import step_attention

            attention = {"flash_ncopy": step_attention.FLASH_NCOPY, "flex_packed": step_attention.FLEX_PACKED}[method]
        policy.lm.set_attn_implementation(attention)
        micro_batches = [(b.to(device), ids) for b, ids in work.packed_micro_batches(groups, n)]
        bench._step(policy, micro_batches, advantages)
        bench._synchronize(device)
        torch.distributed.barrier()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
            start = time.perf_counter()
            bench._step(policy, micro_batches, advantages)
            bench._synchronize(device)
            wall = time.perf_counter() - start
        kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        spans = [(e.time_range.start, e.time_range.end, category(e.name)) for e in kernels]
        all_union = union([(s, e) for s, e, _ in spans]) / 1e6
        compute_union = union([(s, e) for s, e, c in spans if c != "nccl"]) / 1e6
        totals = collections.Counter()
        for s, e, c in spans:
            totals[c] += (e - s) / 1e6
        attention_ends = sorted(e for s, e, c in spans if c.startswith("attention"))
        import bisect

        after_attention = 0
        nccl_starts = [s for s, e, c in spans if c == "nccl"]
        for s in nccl_starts:
            i = bisect.bisect_right(attention_ends, s) - 1
            if i >= 0 and s - attention_ends[i] < 50:
                after_attention += 1
        if torch.distributed.get_rank() == 0:
            print(f"== {method} rank 0 P={p} N={n} layers={config.num_hidden_layers}: wall {wall:.3f} s; "
                  f"some kernel {all_union:.3f} s, compute kernels {compute_union:.3f} s, "
                  f"NCCL only {all_union - compute_union:.3f} s, idle {wall - all_union:.3f} s", flush=True)
            for name, t in totals.most_common():
                print(f"  {name:20s} {t:8.3f} s", flush=True)
            print(f"  NCCL kernels: {len(nccl_starts)}, of which {after_attention} started within 50 us of an "
                  f"attention kernel's end", flush=True)
        trace_dir = pathlib.Path(os.environ.get("TRACE_DIR", "/tmp"))
        trace_dir.mkdir(parents=True, exist_ok=True)
        path = trace_dir / f"{method}_rank{torch.distributed.get_rank()}.json"
        profiler.export_chrome_trace(str(path))
        subprocess.run(["gzip", "-f", str(path)], check=True)
        micro_batches = None
        bench._free(device)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
