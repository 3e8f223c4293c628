#!/usr/bin/env python3
"""Session 19 one-off: bench/run_step_bench.py on one GPU with the rollouts of data-parallel rank
SEED_OFFSET (env; the 2-GPU run's rank 1 draws seed * 1000 + 1), printing each timed step's wall
window so that an nvidia-smi log (clocks.sm, power.draw) can be averaged per method's steps."""
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import run_step_bench as bench  # noqa: E402

offset = int(os.environ.get("SEED_OFFSET", "0"))
original_rollouts = bench.synthetic_rollouts


def shifted_rollouts(*args, seed, **kwargs):
    return original_rollouts(*args, seed=seed + offset, **kwargs)


bench.synthetic_rollouts = shifted_rollouts
original_timed = bench._timed_steps


def timed_with_windows(policy, micro_batches, advantages, args, device):
    start = time.time()
    result = original_timed(policy, micro_batches, advantages, args, device)
    print(f"WINDOW rank {os.environ.get('RANK', '0')} {start:.3f} {time.time():.3f}", flush=True)
    return result


bench._timed_steps = timed_with_windows
bench.main(sys.argv[1:])
