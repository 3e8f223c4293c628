#!/usr/bin/env python3
"""One Qwen3-8B decoder layer, forward + backward, on one GRPO group: dualkv against the N-copy batch.

  python3 bench/layer_benchmark.py --out DIR [--quick] [--dry-run] [--seed 0]
                                   [--budget-s 1.5] [--max-ncopy-gib 100]

The layer is transformers' Qwen3DecoderLayer (hidden 4096, intermediate 12288, 32 query heads,
8 KV heads, head dim 128: RMSNorm, q/k-norm, RoPE, SwiGLU), random init, bf16. One group per
configuration: a prompt of P tokens and N responses whose lengths R are drawn uniformly from
[131, 2048] (seeded by --seed, P and N, so a configuration always gets the same lengths).
Methods, all on the same hidden states and output gradient:
  dualkv       the packed stream [prompt | responses] (1, P + sum R, 4096), attn_implementation
               "dualkv", RoPE positions from the layout (each response restarts at P).
  fa_ncopy     the N-copy batch (N, P + max R, 4096), one row [prompt; response] per response,
               right padded; attn_implementation "sdpa" under sdpa_kernel(FLASH_ATTENTION) with no
               mask (causal; right padding is never seen by a real token), GQA native. The padded
               positions go through the projections and MLP too, as in a trainer's padded batch.
  flex_packed  the packed stream with FlexAttention (torch.compile(flex_attention), enable_gqa)
               and a block mask built from the layout before timing.
Before timing, the smallest configuration checks that every method gives the same output and
input gradient on the real tokens (a wrong mask is an O(1) error; bf16 rounding is not).
Timing: CUDA events around forward and backward; warm-up steps (FlexAttention's compilation
included), then as many repeats as --budget-s allows (at least 2, at most 10), median reported.
Peak memory: torch.cuda.max_memory_allocated over the first step, weights included. A method
that runs out of memory is reported as OOM; an N-copy configuration whose estimated peak
(dualkv's measured bytes per token times the padded N-copy tokens) exceeds --max-ncopy-gib is
skipped. Outputs under --out: layer_benchmark.json, layer_benchmark.txt, layer_speedup.png.
--dry-run runs the same logic on the CPU with a tiny layer and without FlexAttention.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import pathlib
import platform
import random
import statistics
import time
from dataclasses import dataclass

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AttentionInterface, Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RotaryEmbedding

import dualkv
import dualkv.transformers  # registers attn_implementation="dualkv"

FULL_CONFIGS = [(p, n) for p in (5120, 8192, 16384, 32768) for n in (4, 8, 16, 32)]
QUICK_CONFIGS = [(5120, 4), (8192, 16)]
DRY_RUN_CONFIGS = [(40, 3), (56, 5)]
RESPONSE_RANGE = (131, 2048)
DRY_RUN_RESPONSE_RANGE = (3, 20)
METHODS = ("dualkv", "fa_ncopy", "flex_packed")
FLEX_ATTENTION_NAME = "dualkv_bench_flex_packed"
# bf16 keeps 8 significant bits (eps 2^-7): methods that compute the same function differ by a
# few eps in relative norm; a wrong mask or position differs by O(1).
CHECK_TOLERANCE = 4 * torch.finfo(torch.bfloat16).eps
WARMUP_STEPS = {"dualkv": 1, "fa_ncopy": 1, "flex_packed": 2}  # flex compiles its forward and backward
MIN_REPEATS, MAX_REPEATS = 2, 10
GIB = 2**30


def qwen3_8b_layer_config(dry_run: bool) -> Qwen3Config:
    if dry_run:
        sizes = {
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
        }
    else:
        sizes = {
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
        }
    # Qwen3-8B's RoPE base and norm epsilon; one layer, no embedding table is built.
    return Qwen3Config(
        **sizes,
        num_hidden_layers=1,
        max_position_embeddings=40960,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        vocab_size=16,
    )


@dataclass
class Problem:
    """One group: the packed layout and the N-copy rows, sharing one set of hidden states."""

    prompt_length: int
    num_responses: int
    response_lengths: list[int]
    layout: dualkv.Layout
    row_index: torch.Tensor  # (N, L) packed token of each row position, -1 on padding
    hidden: torch.Tensor  # (1, T, hidden) packed layer input
    grad_output: torch.Tensor  # (1, T, hidden) gradient of the layer output

    @property
    def packed_tokens(self) -> int:
        return self.layout.num_tokens

    @property
    def ncopy_tokens(self) -> int:
        return self.row_index.numel()

    def to_rows(self, packed: torch.Tensor) -> torch.Tensor:
        """(1, T, ...) packed values -> (N, L, ...) N-copy rows, zeros on padding."""
        keep = (self.row_index >= 0)[..., None]
        return torch.where(
            keep, packed[0, self.row_index.clamp(min=0)], torch.zeros((), dtype=packed.dtype, device=packed.device)
        )

    def gradient_to_rows(self, packed: torch.Tensor) -> torch.Tensor:
        """The N-copy output gradient of the same loss: a prompt token's output is used once in the
        packed stream but held by every row, so its gradient goes to row 0 and the copies get zero."""
        rows = self.to_rows(packed)
        rows[1:, : self.prompt_length] = 0
        return rows

    def rows_to_packed(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, L, ...) per-row gradients -> (T, ...) fp32: a prompt token's gradient is the sum over rows."""
        real = self.row_index >= 0
        packed = torch.zeros(self.packed_tokens, *rows.shape[2:], dtype=torch.float32, device=rows.device)
        return packed.index_add_(0, self.row_index[real], rows[real].float())


def make_problem(prompt_length, num_responses, response_range, hidden_size, seed, device) -> Problem:
    rng = random.Random(f"{seed}:{prompt_length}:{num_responses}")
    lengths = [rng.randint(*response_range) for _ in range(num_responses)]
    layout = dualkv.Layout.from_lengths([prompt_length], [lengths])
    width = prompt_length + max(lengths)
    row_index = torch.full((num_responses, width), -1, dtype=torch.long)
    begin = prompt_length
    for i, length in enumerate(lengths):
        row_index[i, :prompt_length] = torch.arange(prompt_length)
        row_index[i, prompt_length : prompt_length + length] = torch.arange(begin, begin + length)
        begin += length
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (1, layout.num_tokens, hidden_size)
    hidden = torch.randn(shape, generator=gen, device=device, dtype=torch.bfloat16)
    grad_output = torch.randn(shape, generator=gen, device=device, dtype=torch.bfloat16)
    return Problem(prompt_length, num_responses, lengths, layout.to(device), row_index.to(device), hidden, grad_output)


def flex_packed_attention(module, query, key, value, attention_mask, scaling=None, flex_block_mask=None, **kwargs):
    """transformers attention function: FlexAttention over the packed stream with a prepared block mask."""
    out = _compiled_flex_attention(query, key, value, block_mask=flex_block_mask, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2), None


_compiled_flex_attention = None


def build_flex_block_mask(layout: dualkv.Layout):
    """The dualkv visibility rule as a FlexAttention block mask over the packed stream (a tree
    layout's through its ancestor table, bench/tree_workload.py)."""
    from torch.nn.attention.flex_attention import create_block_mask

    if not layout.is_two_level:
        from tree_workload import flex_tree_block_mask

        return flex_tree_block_mask(layout, layout.device)
    segment, group = layout.segment_ids, layout.group_ids
    prompt_segments = layout.cu_groups[:-1].to(segment.device).long()
    in_prompt = torch.isin(segment, prompt_segments)

    def visible(batch, head, q, k):
        return (k <= q) & (group[q] == group[k]) & (in_prompt[k] | (segment[q] == segment[k]))

    tokens = layout.num_tokens
    return create_block_mask(visible, None, None, tokens, tokens, device=segment.device)


class Step:
    """One forward + backward of the layer for one method; inputs prepared outside the timing."""

    def __init__(self, method: str, layer: Qwen3DecoderLayer, rotary: Qwen3RotaryEmbedding, problem: Problem):
        self.method, self.layer = method, layer
        if method == "fa_ncopy":
            self.hidden = problem.to_rows(problem.hidden).requires_grad_()
            self.grad_output = problem.gradient_to_rows(problem.grad_output)
            positions = torch.arange(problem.row_index.shape[1], device=problem.hidden.device)[None]
            self.kwargs = {}
        else:
            self.hidden = problem.hidden.detach().clone().requires_grad_()
            self.grad_output = problem.grad_output
            positions = problem.layout.position_ids[None]
            # dualkv checks that the rotary embeddings used the layout's positions, so its layer
            # receives them as a model's forward would pass them.
            self.kwargs = (
                {"dualkv_layout": problem.layout, "position_ids": positions}
                if method == "dualkv"
                else {"flex_block_mask": build_flex_block_mask(problem.layout)}
            )
        self.position_embeddings = rotary(self.hidden, positions)
        self.attention_name = {"dualkv": "dualkv", "fa_ncopy": "sdpa", "flex_packed": FLEX_ATTENTION_NAME}[method]

    def forward(self) -> torch.Tensor:
        self.layer.self_attn.config._attn_implementation = self.attention_name
        return self.layer(self.hidden, position_embeddings=self.position_embeddings, **self.kwargs)

    def clear_gradients(self) -> None:
        self.hidden.grad = None
        for parameter in self.layer.parameters():
            parameter.grad = None


class Timer:
    """Forward and backward times in ms: CUDA events on a GPU, wall clock on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def elapsed_ms(self, start, end) -> float:
        if self.cuda:
            return start.elapsed_time(end)
        return (end - start) * 1e3

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def run_step(step: Step, timer: Timer, flash_only: bool) -> tuple[float, float]:
    step.clear_gradients()
    timer.synchronize()
    start = timer.mark()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION) if flash_only else contextlib.nullcontext():
        out = step.forward()
        middle = timer.mark()
        out.backward(step.grad_output)
    end = timer.mark()
    timer.synchronize()
    return timer.elapsed_ms(start, middle), timer.elapsed_ms(middle, end)


def measure(step: Step, timer: Timer, flash_only: bool, budget_s: float) -> dict:
    """Warm-up, then repeats within the budget; median forward / backward / total ms, peak GiB."""
    if timer.cuda:
        torch.cuda.reset_peak_memory_stats()
    for _ in range(WARMUP_STEPS[step.method]):
        run_step(step, timer, flash_only)
    peak = torch.cuda.max_memory_allocated() / GIB if timer.cuda else None
    samples = [run_step(step, timer, flash_only)]
    first_s = sum(samples[0]) / 1e3
    repeats = max(MIN_REPEATS, min(MAX_REPEATS, int(budget_s / max(first_s, 1e-6))))
    samples += [run_step(step, timer, flash_only) for _ in range(repeats - 1)]
    forward = statistics.median(f for f, _ in samples)
    backward = statistics.median(b for _, b in samples)
    total = statistics.median(f + b for f, b in samples)
    return {
        "status": "ok",
        "forward_ms": forward,
        "backward_ms": backward,
        "total_ms": total,
        "peak_gib": peak,
        "repeats": len(samples),
    }


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.detach().float(), expected.detach().float()
    return float((actual - expected).norm() / expected.norm())


def check_methods_agree(layer, rotary, problem, methods, flash_only) -> dict:
    """Layer output and input gradient of every method against dualkv's, on the real tokens."""
    results = {}
    for method in methods:
        step = Step(method, layer, rotary, problem)
        step.clear_gradients()
        with (
            sdpa_kernel(SDPBackend.FLASH_ATTENTION) if flash_only and method == "fa_ncopy" else contextlib.nullcontext()
        ):
            out = step.forward()
            out.backward(step.grad_output)
        if method == "fa_ncopy":
            real = problem.row_index >= 0
            # Every row holds the prompt: compare each row's copy with the packed prompt output.
            results[method] = (out[real], problem.rows_to_packed(step.hidden.grad), problem.row_index[real])
        else:
            results[method] = (out[0], step.hidden.grad[0].float(), None)
    reference_out, reference_grad, _ = results["dualkv"]
    errors = {}
    for method, (out, grad, index) in results.items():
        if method == "dualkv":
            continue
        expected_out = reference_out if index is None else reference_out[index]
        errors[method] = {
            "output": relative_error(out, expected_out),
            "input_grad": relative_error(grad, reference_grad),
        }
        for name, error in errors[method].items():
            if not error <= CHECK_TOLERANCE:
                raise SystemExit(
                    f"check failed: {method} {name} relative error {error:.3e} > {CHECK_TOLERANCE:.3e} against dualkv"
                )
    layer.zero_grad(set_to_none=True)
    return errors


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_method(method, layer, rotary, problem, timer, flash_only, budget_s, device) -> dict:
    try:
        step = Step(method, layer, rotary, problem)
        result = measure(step, timer, flash_only and method == "fa_ncopy", budget_s)
    except torch.OutOfMemoryError:
        result = {"status": "OOM"}
    step = None
    layer.zero_grad(set_to_none=True)
    free_memory(device)
    return result


def estimated_ncopy_peak_gib(dualkv_result: dict, static_gib: float, problem: Problem) -> float | None:
    """The N-copy peak from dualkv's measured activation bytes per token (same layer, per-token work)."""
    if dualkv_result.get("peak_gib") is None:
        return None
    per_token = (dualkv_result["peak_gib"] - static_gib) / problem.packed_tokens
    return static_gib + per_token * problem.ncopy_tokens


def speedups(methods: dict) -> dict:
    base = methods.get("dualkv", {})
    if base.get("status") != "ok":
        return {}
    return {
        name: result["total_ms"] / base["total_ms"]
        for name, result in methods.items()
        if name != "dualkv" and result.get("status") == "ok"
    }


def format_row(entry: dict, methods: tuple[str, ...]) -> str:
    cells = [f"{entry['P']:>6}", f"{entry['N']:>3}", f"{entry['packed_tokens']:>7}", f"{entry['ncopy_tokens']:>8}"]
    for method in methods:
        result = entry["methods"][method]
        if result["status"] == "ok":
            peak = "" if result["peak_gib"] is None else f" {result['peak_gib']:6.1f}G"
            cells.append(f"{result['total_ms']:9.2f}{peak}")
        else:
            cells.append(f"{result['status']:>9}{'':8}")
    for method in methods[1:]:
        speedup = entry["speedup"].get(method)
        cells.append(f"{speedup:7.2f}x" if speedup is not None else f"{'-':>8}")
    return " ".join(cells)


def table_header(methods: tuple[str, ...]) -> str:
    cells = [f"{'P':>6}", f"{'N':>3}", f"{'T_pack':>7}", f"{'T_ncopy':>8}"]
    cells += [f"{m + ' ms/GiB':>17}" for m in methods]
    cells += [f"{'vs ' + m:>8}" for m in methods[1:]]
    return " ".join(cells)


def plot_speedups(entries: list[dict], methods: tuple[str, ...], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    baselines = methods[1:]
    figure, axes = plt.subplots(1, len(baselines), figsize=(6 * len(baselines), 4.5), squeeze=False)
    for axis, baseline in zip(axes[0], baselines):
        for n in sorted({e["N"] for e in entries}):
            points = [(e["P"], e["speedup"][baseline]) for e in entries if e["N"] == n and baseline in e["speedup"]]
            if points:
                axis.plot(*zip(*points), marker="o", label=f"N={n}")
        axis.axhline(1.0, color="gray", linewidth=0.8)
        axis.set_xscale("log", base=2)
        prompt_lengths = sorted({e["P"] for e in entries})
        axis.set_xticks(prompt_lengths, [f"{p / 1024:g}K" if p >= 1024 else str(p) for p in prompt_lengths])
        axis.minorticks_off()
        axis.set_xlabel("prompt length P (tokens)")
        axis.set_ylabel(f"speedup of dualkv over {baseline}")
        axis.set_title(f"Qwen3-8B layer fwd+bwd: dualkv vs {baseline}")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK_CONFIGS} as (P, N)")
    parser.add_argument("--dry-run", action="store_true", help="tiny layer on the CPU, no FlexAttention")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=1.5, help="timed seconds per method and configuration")
    parser.add_argument("--max-ncopy-gib", type=float, default=100.0)
    args = parser.parse_args()

    device = torch.device("cpu" if args.dry_run else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no GPU: run with --dry-run on the CPU")
    methods = METHODS[:2] if args.dry_run else METHODS
    configs = DRY_RUN_CONFIGS if args.dry_run else QUICK_CONFIGS if args.quick else FULL_CONFIGS
    response_range = DRY_RUN_RESPONSE_RANGE if args.dry_run else RESPONSE_RANGE
    flash_only = device.type == "cuda"
    if "flex_packed" in methods:
        from torch.nn.attention.flex_attention import flex_attention

        global _compiled_flex_attention
        # Default (automatic) dynamic shapes: the second packed length recompiles once with a
        # symbolic length instead of once per configuration.
        _compiled_flex_attention = torch.compile(flex_attention)
        AttentionInterface.register(FLEX_ATTENTION_NAME, flex_packed_attention)

    config = qwen3_8b_layer_config(args.dry_run)
    torch.manual_seed(args.seed)
    layer = Qwen3DecoderLayer(config, layer_idx=0).to(device=device, dtype=torch.bfloat16).train()
    rotary = Qwen3RotaryEmbedding(config).to(device)
    static_gib = torch.cuda.memory_allocated() / GIB if device.type == "cuda" else 0.0
    timer = Timer(device)

    smallest = min(configs, key=lambda c: c[0] + c[1] * response_range[1])
    check_problem = make_problem(*smallest, response_range, config.hidden_size, args.seed, device)
    check = check_methods_agree(layer, rotary, check_problem, methods, flash_only)
    print(f"methods agree with dualkv on P={smallest[0]} N={smallest[1]}: {check}", flush=True)
    del check_problem
    free_memory(device)

    args.out.mkdir(parents=True, exist_ok=True)
    lines = [table_header(methods)]
    print(lines[0], flush=True)
    entries = []
    for p, n in configs:
        problem = make_problem(p, n, response_range, config.hidden_size, args.seed, device)
        results = {}
        for method in methods:
            estimate = (
                estimated_ncopy_peak_gib(results["dualkv"], static_gib, problem) if method == "fa_ncopy" else None
            )
            if estimate is not None and estimate > args.max_ncopy_gib:
                results[method] = {"status": "skipped", "estimated_peak_gib": estimate}
            else:
                results[method] = run_method(method, layer, rotary, problem, timer, flash_only, args.budget_s, device)
        entry = {
            "P": p,
            "N": n,
            "response_lengths": problem.response_lengths,
            "packed_tokens": problem.packed_tokens,
            "ncopy_tokens": problem.ncopy_tokens,
            "methods": results,
            "speedup": speedups(results),
        }
        entries.append(entry)
        lines.append(format_row(entry, methods))
        print(lines[-1], flush=True)
        del problem
        free_memory(device)

    report = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "layer": {
            "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size,
            "heads": config.num_attention_heads,
            "kv_heads": config.num_key_value_heads,
            "head_dim": config.head_dim,
            "dtype": "bfloat16",
        },
        "response_range": list(response_range),
        "seed": args.seed,
        "weights_gib": static_gib,
        "check_relative_errors": check,
        "check_tolerance": CHECK_TOLERANCE,
        "results": entries,
    }
    (args.out / "layer_benchmark.json").write_text(json.dumps(report, indent=1))
    (args.out / "layer_benchmark.txt").write_text("\n".join(lines) + "\n")
    plot_speedups(entries, methods, args.out / "layer_speedup.png")
    print(f"wrote {args.out}/layer_benchmark.json, layer_benchmark.txt, layer_speedup.png", flush=True)


if __name__ == "__main__":
    main()
