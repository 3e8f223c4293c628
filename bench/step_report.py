"""The step benchmark's outputs: its table rows and its step_bench.json, .txt and .png. Shared by
bench/run_step_bench.py (one run) and bench/merge_step_results.py (runs of one (P, N) or one
method each, merged), so a merged report reads exactly like one run's."""

from __future__ import annotations

import json
import pathlib

HEADER = (f"{'P':>6} {'N':>3} {'method':>11} {'step s':>8} {'N-copy tok/s':>12} {'peak GiB':>8} "
          f"{'MFU hon.':>8} {'MFU eff.':>8} {'micro':>5} {'fits':>5}  status")


def format_entry(entry: dict) -> str:
    lines = []
    for method, r in entry["methods"].items():
        def cell(key, spec, width):
            value = r.get(key)
            return f"{value:{spec}}" if value is not None else f"{'-':>{width}}"

        lines.append(
            f"{entry['P']:>6} {entry['N']:>3} {method:>11} {cell('step_s', '8.3f', 8)} "
            f"{cell('ncopy_tokens_per_s', '12.0f', 12)} {cell('peak_memory_gib', '8.1f', 8)} "
            f"{cell('mfu_honest', '8.1%', 8)} {cell('mfu_effective', '8.1%', 8)} {cell('micro_batch', '5d', 5)} "
            f"{cell('largest_micro_batch', '5d', 5)}  {r['status']}"
        )
    return "\n".join(lines)


def table(report: dict) -> str:
    return "\n".join([HEADER, *(format_entry(e) for e in report["entries"])])


def write_report(report: dict, out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "step_bench.json").write_text(json.dumps(report, indent=1))
    (out / "step_bench.txt").write_text(table(report) + "\n")
    try:
        import matplotlib
    except ImportError:
        print("step_bench.png not written: matplotlib is not installed (pip install matplotlib)", flush=True)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    labels = [f"P={e['P'] // 1024 if e['P'] >= 1024 else e['P']}{'K' if e['P'] >= 1024 else ''} N={e['N']}"
              for e in report["entries"]]
    # Every method of any entry: one run gives each entry the same methods, merged runs may not
    # (one run with --methods), and a method an entry lacks is a 0 bar ("did not run").
    methods = list(dict.fromkeys(m for e in report["entries"] for m in e["methods"]))
    width = 0.8 / max(len(methods), 1)
    for k, method in enumerate(methods):
        rates = [e["methods"].get(method, {}).get("ncopy_tokens_per_s", 0.0) for e in report["entries"]]
        axis.bar([x + k * width for x in range(len(labels))], rates, width, label=method)
    axis.set_xticks([x + width * (len(methods) - 1) / 2 for x in range(len(labels))], labels, rotation=30)
    axis.set_ylabel("N-copy tokens per second (0: did not run)")
    axis.set_title(f"policy-update step, {report['model']}, {report['world_size']} x {report['device']}")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / "step_bench.png", dpi=120)
    plt.close(figure)
