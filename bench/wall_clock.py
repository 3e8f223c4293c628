"""Wall-clock timing of a benchmark step on the CPU or one GPU, shared by the Python benchmarks
that time whole steps (recurrent layers, trees, the policy-update step)."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

GIB = 2**30


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_repeats(step: Callable[[], Any], repeats: int, device: torch.device) -> tuple[list[float], list, float | None]:
    """Runs `step` `repeats` times, each timed from a synchronized device to a synchronized device.
    Returns the seconds of each run, what each run returned, and the peak memory of these runs in
    GiB (None on a CPU): the peak counts from here, so warm-up runs done before stay out of it."""
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, values = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        values.append(step())
        synchronize(device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) / GIB if device.type == "cuda" else None
    return times, values, peak
