#!/usr/bin/env python3
"""Session 19 one-off: bench/run_step_bench.py as it was before the compile-cache reset after the
fit search (torch._dynamo.reset made a no-op), so FlexAttention's timed step runs the kernel that
automatic dynamic shapes compiled for a symbolic stream length."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import run_step_bench as bench  # noqa: E402

torch._dynamo.reset = lambda: None
bench.main(sys.argv[1:])
