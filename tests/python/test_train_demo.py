"""The README's main command, scripts/train_demo.sh, on a CPU: a tiny Qwen3's policy update packed
and N-copy, equal losses and gradients, and the token reduction; its verdict can say DIFFERENT."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from dualkv.training import compare

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ["--groups", "2", "--responses", "3", "--prompt-length", "24", "--response-length", "3", "9", "--max-tokens", "40"]


def test_main_command_prints_equal_updates_and_the_token_reduction():
    # Installs nothing (the suite runs against the package it built) and takes the CPU path even
    # on a GPU machine, whose path is the step benchmark (tests/python/test_step_bench.py).
    env = {**os.environ, "DUALKV_NO_INSTALL": "1", "DUALKV_DEVICE": "cpu", "PYTHON": sys.executable}
    result = subprocess.run(
        [str(ROOT / "scripts" / "train_demo.sh"), *TINY], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    packed, ncopy, reduction = re.search(r"tokens +packed (\d+) vs N-copy (\d+) \(([\d.]+)x fewer\)", out).groups()
    assert int(ncopy) > int(packed) and float(reduction) == pytest.approx(int(ncopy) / int(packed), abs=0.01)
    losses = re.search(r"loss +packed (\S+) +N-copy (\S+)", out).groups()
    assert float(losses[0]) == pytest.approx(float(losses[1]), rel=compare.LOSS_TOLERANCE)
    assert "EQUAL: losses within" in out


def test_help_lists_the_defaults_without_loading_torch(tmp_path):
    """--help answers before any install or import: a torch that cannot be imported does not stop it."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('--help imported torch')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHON": sys.executable, "DUALKV_NO_INSTALL": "1"}
    result = subprocess.run(
        [str(ROOT / "scripts" / "train_demo.sh"), "--help"], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--groups GROUPS       prompt groups (default: 3)" in result.stdout
    assert "--prompt-lengths 8192 --responses 32 --fuse-elementwise --max-fit 32" in result.stdout
    assert f"into {sys.executable}" in result.stdout and "virtual environment" in result.stdout


def test_verdict_says_different_when_the_updates_differ(monkeypatch, capsys):
    # A zero tolerance no fp32 summation order meets: the verdict must then be DIFFERENT.
    monkeypatch.setattr(compare, "GRADIENT_TOLERANCE", 0.0)
    result = compare.main(TINY)
    assert not result["equal"] and "DIFFERENT" in capsys.readouterr().out
