#!/usr/bin/env python3
"""One-off (session 14): where one policy-update step's GPU time goes, per method.

Builds the step benchmark's policy (bench/run_step_bench.py), runs one warm-up step per method,
then one step under torch.profiler, and prints the CUDA kernel time by category (attention
forward / backward, GEMM, NCCL, the rest), with the step's wall time.

    python3 exp/profile_step.py --layers 8 --prompt-lengths 8192 --responses 32 --methods dualkv flex_packed
"""

import collections
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import run_step_bench as bench  # noqa: E402
import step_workload as work  # noqa: E402
from dualkv.training import init_parallelism, synthetic_rollouts  # noqa: E402
from dualkv.training.parallel import init_distributed  # noqa: E402


def category(name: str) -> str:
    lower = name.lower()
    if "token_scores" in lower:
        return "other"
    if "dualkv" in lower or "sm90::" in lower or "sm80::" in lower:
        return "attention backward" if "backward" in lower or "dq_convert" in lower else "attention forward"
    if "flash" in lower:
        return "attention backward" if "bwd" in lower else "attention forward"
    if "triton" in lower and ("tem_" in lower or "flex" in lower):
        return "attention backward" if "bwd" in lower or "backward" in lower else "attention forward"
    if "nccl" in lower:
        return "nccl"
    if any(key in lower for key in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "cublas")):
        return "gemm"
    return "other"


def fuse_norms_and_mlp(model) -> None:
    """Experiment: every RMSNorm and SiLU MLP of the model through torch.compile'd functions."""

    @torch.compile(dynamic=True, fullgraph=True)
    def rms_norm(hidden, weight, eps: float):
        x = hidden.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return weight * x.to(hidden.dtype)

    @torch.compile(dynamic=True, fullgraph=True)
    def silu_mul(gate, up):
        return torch.nn.functional.silu(gate) * up

    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm"):
            module.forward = lambda h, m=module: rms_norm(h, m.weight, m.variance_epsilon)
        elif name.endswith("MLP"):
            module.forward = lambda x, m=module: m.down_proj(silu_mul(m.gate_proj(x), m.up_proj(x)))


def main() -> None:
    fuse = "--fuse" in sys.argv
    args = bench._parse([a for a in sys.argv[1:] if a != "--fuse"])
    device = init_distributed(args.device)
    parallel = init_parallelism(1, device)
    policy, config = bench._build_policy(args, device, parallel)
    if fuse:
        fuse_norms_and_mlp(policy.lm)
    p, n = args.prompt_lengths[0], args.responses[0]
    groups = synthetic_rollouts(args.groups, n, p, tuple(args.response_length), config.vocab_size, seed=args.seed)
    advantages = bench._advantages(groups, device)
    for method in args.methods:
        attention = {"dualkv": "dualkv"}.get(method)
        if attention is None:
            import step_attention

            attention = {"flash_ncopy": step_attention.FLASH_NCOPY, "flex_packed": step_attention.FLEX_PACKED}[method]
        policy.lm.set_attn_implementation(attention)
        split = work.ncopy_micro_batches if method == "flash_ncopy" else work.packed_micro_batches
        micro_batches = [(b.to(device), ids) for b, ids in split(groups, args.micro_batch or n)]
        bench._step(policy, micro_batches, advantages)
        bench._synchronize(device)
        cuda = device.type == "cuda"  # on a CPU (a check of this script) the CPU operators stand in
        activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
        with torch.profiler.profile(activities=[activity]) as profiler:
            start = time.perf_counter()
            bench._step(policy, micro_batches, advantages)
            bench._synchronize(device)
            wall = time.perf_counter() - start
        totals, names = collections.Counter(), collections.Counter()
        for event in profiler.events():
            if event.device_type == (torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU):
                us = event.device_time_total if cuda else event.self_cpu_time_total
                totals[category(event.name)] += us
                names[event.name] += us
        kernel = sum(totals.values())
        if torch.distributed.get_rank() != 0:
            continue
        compute = kernel - totals["nccl"]
        print(f"== {method}{' fused' if fuse else ''} P={p} N={n} layers={config.num_hidden_layers}: step {wall:.3f} s under the profiler, "
              f"kernels {kernel / 1e6:.3f} s")
        print(f"   kernels outside NCCL {compute / 1e6:.3f} s; step wall minus those {wall - compute / 1e6:.3f} s")
        for name, us in totals.most_common():
            print(f"  {name:20s} {us / 1e6:8.3f} s  {100 * us / kernel:5.1f}%")
        for name, us in names.most_common(45):
            print(f"    {us / 1e6:8.3f} s  {name[:110]}")
        micro_batches = None
        bench._free(device)


if __name__ == "__main__":
    main()
