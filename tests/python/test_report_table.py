"""bench/report_table.py labels each dualkv run by its kernel family and backward mode, also in
JSON files written before dualkv_bench recorded the mode (those ran the default mode)."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAPE = {"R": 2048, "H": 32, "Hk": 8, "d": 128}


def _entry(n, p, **fields):
    return {"config": f"N{n}_P{p}", "N": n, "P": p, **SHAPE, "forward_ms": 1.0, "backward_ms": 2.0, **fields}


def test_deterministic_runs_are_labelled_and_files_without_the_field_are_not(tmp_path):
    """A dualkv_bench file without the field (the default mode) next to one with it."""
    shapes = [(28, 4096), (16, 65536)]
    report = {"device": "d", "kernel_family": "hopper",
              "results": [_entry(n, p, dtype="bfloat16", peak_bytes=0) for n, p in shapes]}
    default_run = tmp_path / "dualkv_hopper.json"
    default_run.write_text(json.dumps(report))
    baselines = tmp_path / "baselines.json"
    baselines.write_text(json.dumps({"device": "d", "torch": "t", "results": [
        _entry(n, p, dtype="bf16", baseline="fa4_composition", status="ok", fb_ms=3.0, peak_bytes=0)
        for n, p in shapes]}))
    deterministic_run = tmp_path / "dualkv_hopper_det.json"
    deterministic_run.write_text(json.dumps({**report, "deterministic": True}))

    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "report_table.py"), str(default_run), str(deterministic_run),
         str(baselines)],
        capture_output=True, text=True, check=True,
    )
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"dualkv hopper: {default_run} on ")
    assert lines[1].startswith(f"dualkv hopper det: {deterministic_run} on ")
    methods = [line.split()[:3] for line in lines if line.startswith("  dualkv")]
    assert methods.count(["dualkv", "hopper", "det"]) == len(report["results"])
    assert len(methods) == 2 * len(report["results"])


def test_ragged_entries_count_every_responses_pairs(tmp_path):
    lengths, p, heads, head_dim = [1000, 2000], 8192, 32, 128
    common = {"config": "N2_P8192_R1000-2000", "N": 2, "P": p, "R": lengths, "H": heads, "Hk": 8, "d": head_dim}
    pairs = p * (p + 1) // 2 + sum(r * p + r * (r + 1) // 2 for r in lengths)
    flops = 4 * head_dim * heads * pairs
    dualkv = tmp_path / "dualkv.json"
    dualkv.write_text(json.dumps({"device": "d", "kernel_family": "hopper", "results": [
        {**common, "dtype": "bfloat16", "forward_ms": 1.0, "backward_ms": 2.0, "peak_bytes": 0}]}))
    baselines = tmp_path / "baselines.json"
    baselines.write_text(json.dumps({"device": "d", "torch": "t", "results": [
        {**common, "dtype": "bf16", "baseline": "cudnn_composition", "status": "unsupported",
         "reason": "equal lengths only"}]}))

    result = subprocess.run([sys.executable, str(ROOT / "bench" / "report_table.py"), str(dualkv), str(baselines)],
                            capture_output=True, text=True, check=True)
    dualkv_line = next(line for line in result.stdout.splitlines() if line.startswith("  dualkv"))
    assert dualkv_line.split()[2:6] == ["1.00", f"{flops / 1e9:.1f}", "2.00", f"{2.5 * flops / 2.0 / 1e9:.1f}"]
    assert "cudnn_composition        unsupported (equal lengths only)" in result.stdout
