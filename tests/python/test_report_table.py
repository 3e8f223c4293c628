"""bench/report_table.py labels each dualkv run by its kernel family and backward mode, also in
JSON files written before dualkv_bench recorded the mode (those ran the default mode)."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "2026-11-23b-h100" / "bench_bf16"


def test_deterministic_runs_are_labelled_and_files_without_the_field_are_not(tmp_path):
    default_run = RESULTS / "dualkv_hopper.json"
    report = json.loads(default_run.read_text())
    assert "deterministic" not in report
    deterministic_run = tmp_path / "dualkv_hopper_det.json"
    deterministic_run.write_text(json.dumps({**report, "deterministic": True}))

    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "report_table.py"), str(default_run), str(deterministic_run),
         str(RESULTS / "baselines.json")],
        capture_output=True, text=True, check=True,
    )
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"dualkv hopper: {default_run} on ")
    assert lines[1].startswith(f"dualkv hopper det: {deterministic_run} on ")
    methods = [line.split()[:3] for line in lines if line.startswith("  dualkv")]
    assert methods.count(["dualkv", "hopper", "det"]) == len(report["results"])
    assert len(methods) == 2 * len(report["results"])
