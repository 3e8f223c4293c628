#!/usr/bin/env python3
"""Tree benchmark: a synthetic agentic workload (multi-turn, tool-using trajectories that branch),
packed as one tree layout, against every trajectory run alone (the N-copy batch) and against the
same packed tree through FlexAttention. One command on one GPU:

    python3 bench/run_tree_bench.py --out OUT          # attention, then the Qwen3-8B step
    python3 bench/run_tree_bench.py --device cpu --model tiny-qwen3 --system 24 --task 8 \\
        --trajectories 4 --turns 3 --turn-tokens 6 --tool-tokens 4 8 --out OUT   # the code path on a CPU

Workload (bench/tree_workload.py): --system and --task tokens shared by --trajectories
trajectories of --turns assistant turns of about --turn-tokens tokens with tool outputs of
--tool-tokens (a range) between them, branching in pairs after --branch-after turns (default: a 2K
system prompt, a 1K task, 16 trajectories of 4 turns of 500 tokens, tool outputs of 1-2K tokens,
branching after turn 2). --trees K packs K such workloads (each its own system prompt: K roots),
as a micro-batch of several tasks holds them.

Part "attention": one attention layer (--heads:--kv-heads:--head-dim, Qwen3-8B's 32:8:128 by
default), forward and backward, on random inputs in --dtype:
  dualkv       the packed tree (dualkv.pack_trajectories' layout), dualkv.attention
  flash_ncopy  every trajectory alone, back to back: PyTorch's FlashAttention-2 varlen kernels
               (torch.ops.aten._flash_attention_forward/_backward), its inputs gathered before
               timing; a token shared by k trajectories is computed k times and its dK/dV summed
  flex_triton  the packed tree through torch.compile(flex_attention) with the tree's block mask
               (built before timing): mask_mod (k <= q) & ancestor[segment[q], segment[k]]
  flex_fa4     the same with kernel_options={"BACKEND": "FLASH"} (flash-attn-4), where it runs
First, on a small workload of the same shape, each method's O, dQ, dK and dV (mapped to the packed
rows) are checked against fp32 dense masked attention from the tree's definition; a method that
disagrees stops the run, one that raises is reported as failed and not timed. Then per method: a
warm-up forward + backward (compilation, peak memory), --repeats timed ones (CUDA events), medians.

Part "step": the compute of a policy-update step on --model (random weights, --dtype parameters
and gradients, activation checkpointing): old log-probs (forward only), then log-probs, the DAPO
loss and backward, on the whole batch: dualkv on the packed tree, flash_ncopy on the N-copy batch,
flex_triton / flex_fa4 on the packed tree (bench/step_attention.py's attention functions); median
of --repeats after --warmup steps, peak memory. The old log-probs of every method are compared with
dualkv's (maximum absolute difference, reported).

The speed-up the tree gives is compared with its token reduction (N-copy tokens / packed tokens).
Writes tree_bench.json, tree_bench.txt and, with matplotlib, tree_bench.png under --out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import torch

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv import losses
from dualkv.trajectories import trajectory_rows
from dualkv.training import PackedPolicy
from dualkv.training.models import model_config

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tree_workload as work  # noqa: E402
from wall_clock import GIB, time_repeats  # noqa: E402

METHODS = ("dualkv", "flash_ncopy", "flex_triton", "flex_fa4")


def main(argv=None) -> dict:
    args = _parse(argv)
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    vocab = model_config(args.model).vocab_size
    trajectories = work.agentic_forest(args.trees, **_workload(args), vocab=vocab, seed=args.seed)
    packed = dualkv.pack_trajectories(trajectories)
    ncopy = work.ncopy_batch(trajectories)
    report = {
        "workload": {**_workload(args), "trees": args.trees, "depth": packed.layout.depth,
                     "segments": packed.layout.num_segments},
        "packed_tokens": packed.num_tokens,
        "ncopy_tokens": ncopy.num_tokens,
        "token_reduction": ncopy.num_tokens / packed.num_tokens,
        "packed_pairs": work.visible_pairs(packed.layout),
        "ncopy_pairs": work.visible_pairs(ncopy.layout),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "dtype": args.dtype,
        "torch": torch.__version__,
    }
    methods = [m for m in args.methods if device.type == "cuda" or m in ("dualkv", "flash_ncopy")]
    if "attention" in args.parts:
        report["attention"] = attention_part(args, methods, trajectories, device, dtype)
    if "step" in args.parts:
        report["step"] = step_part(args, methods, trajectories, packed, ncopy, device, dtype)
    _write(report, pathlib.Path(args.out))
    return report


# --- attention ----------------------------------------------------------------------------------


class Problem:
    """Random q, k, v, dout over the packed tree of `trajectories`, and its per-trajectory rows."""

    def __init__(self, trajectories, heads, kv_heads, head_dim, device, dtype, seed=0):
        self.layout = dualkv.pack_trajectories(trajectories).layout
        self.rows = [torch.tensor(r, device=device) for r in trajectory_rows(trajectories)]
        tokens = self.layout.num_tokens
        gen = torch.Generator(device=device).manual_seed(seed)

        def uniform(heads_):
            return (torch.rand(tokens, heads_, head_dim, generator=gen, device=device) * 2 - 1).to(dtype)

        self.q, self.k, self.v, self.dout = uniform(heads), uniform(kv_heads), uniform(kv_heads), uniform(heads)
        self.scale = head_dim**-0.5


class DualkvAttention:
    def __init__(self, problem):
        self.problem = problem
        self.inputs = [t.detach().clone().requires_grad_() for t in (problem.q, problem.k, problem.v)]

    def forward(self):
        return dualkv.attention(*self.inputs, self.problem.layout, softmax_scale=self.problem.scale)

    def backward(self, out):
        return torch.autograd.grad(out, self.inputs, self.problem.dout)

    def packed(self, out, grads):
        return (out, *grads)


class FlashNCopyAttention:
    """Every trajectory alone; each packed row's output from the first trajectory holding it, its
    dK/dV the sum over every trajectory holding it (the others carry no output gradient there)."""

    def __init__(self, problem):
        self.problem = problem
        self.gather = torch.cat(problem.rows)
        first = torch.zeros(problem.layout.num_tokens, dtype=torch.bool, device=self.gather.device)
        keep = []
        for rows in problem.rows:
            keep.append(~first[rows])
            first[rows] = True
        self.keep = torch.cat(keep)
        self.q, self.k, self.v = (t[self.gather] for t in (problem.q, problem.k, problem.v))
        self.dout = problem.dout[self.gather] * self.keep[:, None, None]
        lengths = [len(r) for r in problem.rows]
        self.cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=self.gather.device,
                               dtype=torch.int32)
        self.longest = max(lengths)

    def forward(self):
        if self.q.device.type != "cuda":  # the CPU path of a smoke run: one SDPA per sequence
            return self._sdpa_forward()
        out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            self.q, self.k, self.v, self.cu, self.cu, self.longest, self.longest, 0.0, True, False,
            scale=self.problem.scale)
        return out, lse, rng, unused

    def backward(self, state):
        if self.q.device.type != "cuda":
            out, leaves = state
            return torch.autograd.grad(out, leaves, self.dout)
        out, lse, rng, unused = state
        return torch.ops.aten._flash_attention_backward(
            self.dout, self.q, self.k, self.v, out, lse, self.cu, self.cu, self.longest, self.longest, 0.0, True,
            rng, unused, scale=self.problem.scale)

    def _sdpa_forward(self):
        leaves = [t.detach().clone().requires_grad_() for t in (self.q, self.k, self.v)]
        pieces = []
        for begin, end in zip(self.cu[:-1].tolist(), self.cu[1:].tolist()):
            q, k, v = (t[begin:end].transpose(0, 1) for t in leaves)
            pieces.append(torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=self.problem.scale, enable_gqa=True).transpose(0, 1))
        return torch.cat(pieces), leaves

    def packed(self, state, grads):
        out = state[0]
        tokens = self.problem.layout.num_tokens
        packed_out = out.new_zeros((tokens, *out.shape[1:]))
        packed_out[self.gather[self.keep]] = out[self.keep]
        dq = grads[0].new_zeros((tokens, *grads[0].shape[1:]))
        dq[self.gather[self.keep]] = grads[0][self.keep]
        dk, dv = (g.new_zeros((tokens, *g.shape[1:])).index_add_(0, self.gather, g) for g in grads[1:3])
        return packed_out, dq, dk, dv


class FlexTreeAttention:
    """The packed tree through FlexAttention, (1, heads, T, d), with the tree's block mask."""

    compiled = None

    def __init__(self, problem, backend):
        from torch.nn.attention.flex_attention import flex_attention

        if FlexTreeAttention.compiled is None:
            FlexTreeAttention.compiled = torch.compile(flex_attention)
        self.problem = problem
        self.block_mask = work.flex_tree_block_mask(problem.layout, problem.q.device)
        self.options = {"BACKEND": "FLASH"} if backend == "flash" else None
        self.inputs = [t.detach().transpose(0, 1).unsqueeze(0).clone().requires_grad_()
                       for t in (problem.q, problem.k, problem.v)]
        self.dout = problem.dout.transpose(0, 1).unsqueeze(0)

    def forward(self):
        return FlexTreeAttention.compiled(*self.inputs, block_mask=self.block_mask, scale=self.problem.scale,
                                          enable_gqa=True, kernel_options=self.options)

    def backward(self, out):
        return torch.autograd.grad(out, self.inputs, self.dout)

    def packed(self, out, grads):
        return tuple(x.squeeze(0).transpose(0, 1) for x in (out, *grads))


def make_method(name, problem):
    if name == "dualkv":
        return DualkvAttention(problem)
    if name == "flash_ncopy":
        return FlashNCopyAttention(problem)
    return FlexTreeAttention(problem, "flash" if name == "flex_fa4" else "triton")


def reference(problem):
    """fp32 dense masked attention from the tree's definition: out, dq, dk, dv."""
    segment = problem.layout.segment_ids.to(problem.q.device)
    seen = work.ancestors(problem.layout).to(problem.q.device)
    tokens = segment.numel()
    mask = torch.ones(tokens, tokens, dtype=torch.bool, device=segment.device).tril() & seen[segment][:, segment]
    group = problem.q.shape[1] // problem.k.shape[1]
    leaves = [t.float().requires_grad_() for t in (problem.q, problem.k, problem.v)]
    q, k, v = leaves[0], leaves[1].repeat_interleave(group, 1), leaves[2].repeat_interleave(group, 1)
    scores = torch.einsum("thd,shd->hts", q, k) * problem.scale
    out = torch.einsum("hts,shd->thd", torch.softmax(scores.masked_fill(~mask, float("-inf")), -1), v)
    return (out.detach(), *torch.autograd.grad(out, leaves, problem.dout.float()))


def check_methods(methods, args, device, dtype) -> dict:
    """Each method against the fp32 reference on a small workload of the same shape: the relative
    error (in norm) of out, dq, dk, dv, or the error it raised. Two trees when the run has several."""
    small = work.agentic_forest(min(args.trees, 2), system=96, task=40, trajectories=4, turns=3, turn_tokens=40,
                                tool_tokens=(30, 70), branch_after=2, vocab=1000, seed=args.seed + 1)
    problem = Problem(small, args.heads, args.kv_heads, args.head_dim, device, dtype, seed=1)
    expected = reference(problem)
    tolerance = 2e-5 if dtype == torch.float32 else 2e-2
    checked = {}
    for name in methods:
        try:
            method = make_method(name, problem)
            state = method.forward()
            got = method.packed(state, method.backward(state))
        except Exception as error:  # reported, the method is not timed
            checked[name] = {"status": f"failed: {type(error).__name__}: {error}".splitlines()[0][:300]}
            continue
        errors = {
            label: float((g.detach().float() - e).norm() / e.norm().clamp(min=1e-30))
            for label, g, e in zip(("out", "dq", "dk", "dv"), got, expected)
        }
        if max(errors.values()) > tolerance:
            raise SystemExit(f"{name}: disagrees with the fp32 reference on the small workload: {errors}")
        checked[name] = {"status": "ok", "relative_errors": errors}
    return checked


def attention_part(args, methods, trajectories, device, dtype) -> dict:
    checked = check_methods(methods, args, device, dtype)
    problem = Problem(trajectories, args.heads, args.kv_heads, args.head_dim, device, dtype, seed=args.seed)
    pairs = {"dualkv": work.visible_pairs(problem.layout), "flex_triton": work.visible_pairs(problem.layout)}
    pairs["flex_fa4"] = pairs["dualkv"]
    pairs["flash_ncopy"] = sum(len(r) * (len(r) + 1) // 2 for r in problem.rows)
    results = {}
    for name in methods:
        if checked[name]["status"] != "ok":
            results[name] = checked[name]
            continue
        try:
            results[name] = {**checked[name], **_time_attention(make_method(name, problem), args, device)}
        except torch.OutOfMemoryError:
            results[name] = {"status": "OOM"}
        _free(device)
        if results[name].get("status") == "ok":
            useful = 4 * args.head_dim * args.heads * pairs["dualkv"]  # the tree's pairs, for every method
            results[name]["forward_tflops"] = useful / results[name]["forward_ms"] / 1e9
            results[name]["backward_tflops"] = 2.5 * useful / results[name]["backward_ms"] / 1e9
            results[name]["computed_pairs"] = pairs[name]
    return results


def _time_attention(method, args, device) -> dict:
    def timed(fn):
        if device.type != "cuda":
            start = time.perf_counter()
            value = fn()
            return value, (time.perf_counter() - start) * 1e3
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        value = fn()
        end.record()
        torch.cuda.synchronize(device)
        return value, begin.elapsed_time(end)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    state = method.forward()
    method.backward(state)
    peak = torch.cuda.max_memory_allocated(device) / GIB if device.type == "cuda" else None
    forwards, backwards = [], []
    for _ in range(args.repeats):
        state, forward_ms = timed(method.forward)
        _, backward_ms = timed(lambda: method.backward(state))
        forwards.append(forward_ms)
        backwards.append(backward_ms)
    forward, backward = statistics.median(forwards), statistics.median(backwards)
    return {"forward_ms": forward, "backward_ms": backward, "total_ms": forward + backward, "peak_memory_gib": peak}


# --- step ---------------------------------------------------------------------------------------


def step_part(args, methods, trajectories, packed, ncopy, device, dtype) -> dict:
    from transformers import AutoModelForCausalLM

    import step_attention  # registers the baselines' attention functions

    config = model_config(args.model, **({"num_hidden_layers": args.layers} if args.layers else {}))
    torch.manual_seed(args.seed)
    with torch.device(device):
        lm = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv", dtype=dtype)
    lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy = PackedPolicy(lm).train()
    advantages = losses.group_advantages(torch.rand(len(trajectories), generator=torch.Generator().manual_seed(0)),
                                         packed.response_group).to(device)
    results, reference_logprobs = {}, None
    for name in methods:
        attention = {"dualkv": "dualkv", "flash_ncopy": step_attention.FLASH_NCOPY,
                     "flex_triton": step_attention.FLEX_PACKED, "flex_fa4": step_attention.FLEX_FA4}[name]
        if name.startswith("flex"):
            torch._dynamo.reset()
        policy.lm.set_attn_implementation(attention)
        batch = (ncopy if name == "flash_ncopy" else packed).to(device)
        try:
            times, logprobs, peak = _timed_steps(policy, batch, advantages, args, device)
        except torch.OutOfMemoryError:
            results[name] = {"status": "OOM"}
            _free(device)
            continue
        except Exception as error:  # FA4 may refuse the tree's block mask: reported, not timed
            results[name] = {"status": f"failed: {type(error).__name__}: {error}".splitlines()[0][:300]}
            _free(device)
            continue
        results[name] = {"status": "ok", "step_s": statistics.median(times), "step_s_all": times,
                         "peak_memory_gib": peak, "tokens": batch.num_tokens}
        if name == "dualkv":
            reference_logprobs = logprobs
        elif reference_logprobs is not None:
            results[name]["max_abs_logprob_difference_to_dualkv"] = float((logprobs - reference_logprobs).abs().max())
        _free(device)
    return results


def _timed_steps(policy, batch, advantages, args, device):
    """--warmup steps, then --repeats timed ones: their seconds, the last one's old log-probs, and
    the peak memory of the timed ones (GiB; None on a CPU)."""
    for _ in range(args.warmup):
        _step(policy, batch, advantages)
    times, results, peak = time_repeats(lambda: _step(policy, batch, advantages), args.repeats, device)
    return times, results[-1], peak


def _step(policy, batch, advantages) -> torch.Tensor:
    """Old log-probs (forward only), then log-probs, DAPO loss and backward; the old log-probs of
    the trained tokens (flat, in trajectory order) back."""
    with torch.no_grad():
        old, _ = policy(batch)
    logprobs, _ = policy(batch)
    loss = losses.policy_loss(logprobs, old, advantages, batch.response_mask, clip_low=0.2, clip_high=0.28,
                              aggregation="token-mean")
    loss.backward()
    policy.zero_grad(set_to_none=True)
    return old[batch.response_mask].float()


def _free(device):
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# --- report -------------------------------------------------------------------------------------


def _write(report: dict, out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tree_bench.json").write_text(json.dumps(report, indent=2))
    lines = [
        f"tree benchmark on {report['device']} ({report['dtype']}, torch {report['torch']})",
        f"workload: {report['workload']}",
        f"packed tokens {report['packed_tokens']}, N-copy tokens {report['ncopy_tokens']}: token reduction "
        f"{report['token_reduction']:.2f}x; attention pairs {report['ncopy_pairs'] / report['packed_pairs']:.2f}x fewer",
    ]
    for part, key in (("attention", "total_ms"), ("step", "step_s")):
        if part not in report:
            continue
        lines.append(f"\n{part}:")
        results = report[part]
        base = results.get("dualkv", {}).get(key)
        for name, result in results.items():
            if result.get("status") != "ok":
                lines.append(f"  {name:12s} {result.get('status')}")
                continue
            value = result[key]
            ratio = f"  dualkv {value / base:.2f}x faster" if base and name != "dualkv" else ""
            peak = result.get("peak_memory_gib")
            memory = f", peak {peak:.1f} GiB" if peak is not None else ""
            detail = (f" (fwd {result['forward_ms']:.2f} ms, bwd {result['backward_ms']:.2f} ms)"
                      if part == "attention" else "")
            lines.append(f"  {name:12s} {value:10.4f} {'ms' if part == 'attention' else 's'}{detail}{memory}{ratio}")
        if part == "step" and base and results.get("flash_ncopy", {}).get("status") == "ok":
            speedup = results["flash_ncopy"]["step_s"] / base
            lines.append(f"  step speed-up over N-copy {speedup:.2f}x = {speedup / report['token_reduction']:.0%} "
                         f"of the token reduction")
    (out / "tree_bench.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    _plot(report, out / "tree_bench.png")


def _plot(report, path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    parts = [(part, key) for part, key in (("attention", "total_ms"), ("step", "step_s")) if part in report]
    figure, axes = plt.subplots(1, len(parts), figsize=(5 * len(parts), 3.5), squeeze=False)
    for axis, (part, key) in zip(axes[0], parts):
        names = [n for n, r in report[part].items() if r.get("status") == "ok"]
        axis.bar(names, [report[part][n][key] for n in names])
        axis.set_title(f"{part} ({'ms' if part == 'attention' else 's'})")
        axis.tick_params(axis="x", rotation=20)
    figure.suptitle(f"tree workload: {report['token_reduction']:.2f}x fewer tokens than N-copy")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def _workload(args) -> dict:
    return dict(system=args.system, task=args.task, trajectories=args.trajectories, turns=args.turns,
                turn_tokens=args.turn_tokens, tool_tokens=tuple(args.tool_tokens), branch_after=args.branch_after)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--parts", nargs="+", default=["attention", "step"], choices=("attention", "step"))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--system", type=int, default=2048)
    parser.add_argument("--task", type=int, default=1024)
    parser.add_argument("--trajectories", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=500)
    parser.add_argument("--tool-tokens", type=int, nargs=2, default=[1000, 2000])
    parser.add_argument("--branch-after", type=int, default=2)
    parser.add_argument("--trees", type=int, default=1, help="independent workloads packed together (roots)")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--model", default="qwen3-8b")
    parser.add_argument("--layers", type=int, default=0, help="override the model's layer count (0: as defined)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.trees < 1:
        parser.error(f"--trees must be >= 1, got {args.trees}")
    return args


if __name__ == "__main__":
    main()
