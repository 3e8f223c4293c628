#!/usr/bin/env python3
"""One step-benchmark report from several runs of bench/run_step_bench.py: the whole grid takes
hours, so it can run one configuration, or one method, per invocation, each with its own --out,
and be merged here.

    python3 bench/merge_step_results.py build/step/*/ --out build/step-merged

Takes step_bench.json files or folders holding one. The runs must describe the same step on the
same hardware (COMPATIBLE fields equal). Runs of one (P, N) merge into one entry when they ran the
same workload (every field of the entry but its methods equal: the seeded rollouts' token and
pair counts) and distinct methods. Otherwise nothing is written and the differing field, or the
method given twice, is named. Writes step_bench.json, step_bench.txt and,
with matplotlib, step_bench.png under --out as run_step_bench.py does, entries sorted by (P, N); the
JSON's "sources" lists each input file with the torch version it ran on.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import step_report  # noqa: E402

# What makes rows comparable in one table: the model and step (groups_per_rank: the step's batch)
# and the hardware the rates and MFU are per.
COMPATIBLE = ("model", "num_hidden_layers", "dtype", "groups_per_rank", "response_length", "world_size", "device",
              "peak_flops_per_gpu", "fused_elementwise", "sp")
# The value of a field in reports written before the field existed.
ABSENT_MEANS = {"fused_elementwise": False, "sp": 1}


def load(path: pathlib.Path) -> tuple[pathlib.Path, dict]:
    file = path / "step_bench.json" if path.is_dir() else path
    if not file.is_file():
        raise ValueError(f"{path}: no step_bench.json there")
    return file, json.loads(file.read_text())


def merge(runs: list[tuple[pathlib.Path, dict]]) -> dict:
    """The merged report of (file, report) pairs; ValueError naming the first incompatibility."""
    first_file, first = runs[0]
    for file, report in runs:
        for field in COMPATIBLE:
            value, first_value = (r.get(field, ABSENT_MEANS.get(field)) for r in (report, first))
            if value != first_value:
                raise ValueError(f"{field} differs: {first_value!r} in {first_file}, {value!r} in {file}")
    versions = {report["torch"] for _, report in runs}
    return {
        **first,
        # One version when the runs agree; otherwise each source's own is in "sources".
        "torch": first["torch"] if len(versions) == 1 else "mixed, see sources",
        # Which methods were skipped (and why) depends on the device type, the same in every run;
        # a run with --methods may name fewer of them.
        "skipped_methods": {m: why for _, report in runs for m, why in report["skipped_methods"].items()},
        "entries": sorted(_merged_entries(runs), key=lambda e: (e["P"], e["N"])),
        "sources": [{"file": str(file), "torch": report["torch"]} for file, report in runs],
    }


def _merged_entries(runs: list[tuple[pathlib.Path, dict]]) -> list[dict]:
    """One entry per (P, N): the runs' methods of that configuration together, in the order the
    runs are given; ValueError where two runs of it differ in workload or share a method."""
    merged = {}  # (P, N) -> (entry, the file it first came from, {method: its file})
    for file, report in runs:
        for entry in report["entries"]:
            key = (entry["P"], entry["N"])
            if key not in merged:
                sources = dict.fromkeys(entry["methods"], file)
                merged[key] = ({**entry, "methods": dict(entry["methods"])}, file, sources)
                continue
            into, into_file, source = merged[key]
            for field in sorted((set(entry) | set(into)) - {"methods"}):
                if entry.get(field) != into.get(field):
                    raise ValueError(f"P={key[0]} N={key[1]}: {field} differs: {into.get(field)!r} in {into_file}, "
                                     f"{entry.get(field)!r} in {file}")
            for method, result in entry["methods"].items():
                if method in source:
                    raise ValueError(f"P={key[0]} N={key[1]} {method} is in both {source[method]} and {file}")
                into["methods"][method], source[method] = result, file
    return [entry for entry, _, _ in merged.values()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=pathlib.Path, help="step_bench.json files or folders holding one")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="folder for the merged JSON, table and plot")
    args = parser.parse_args(argv)
    try:
        runs = [load(path) for path in args.runs]
        if (args.out / "step_bench.json").resolve() in {file.resolve() for file, _ in runs}:
            raise ValueError(f"--out {args.out} holds one of the inputs, which the merged report would overwrite")
        report = merge(runs)
    except ValueError as error:
        sys.exit(f"merge_step_results.py: refusing to merge: {error}")
    step_report.write_report(report, args.out)
    print(step_report.table(report))


if __name__ == "__main__":
    main()
