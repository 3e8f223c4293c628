#!/usr/bin/env python3
"""One table from dualkv_bench's JSON files and baselines.py's JSON file (one device run).

  python3 bench/report_table.py DUALKV_JSON [DUALKV_JSON ...] BASELINES_JSON

Each dualkv JSON is one kernel family, labelled by its top-level "kernel_family" ("dualkv" where
it has none) and "det" when its top-level "deterministic" is true (a --deterministic run; files
without the field are from the default mode). Per configuration and dtype, one line per method
(every dualkv family, then every baseline): forward ms and TFLOP/s, backward ms and TFLOP/s,
forward+backward ms, peak GiB (each program's own measure: dualkv_bench the device's high-water
mark, baselines.py torch's allocator). TFLOP/s count the useful FLOPs (docs/performance.md) for every
method, also for baselines that compute more (the N-copy ones): forward 4 d H pairs, backward
2.5x, with
pairs = P(P+1)/2 + sum over responses of (RP + R(R+1)/2) (R a list in ragged entries).
Each dualkv line ends with its speedup over the fastest exact alternative on the packed layout
(cudnn_composition, fa4_composition, flex_fa4, flex_packed) in forward / backward /
forward+backward, each against the alternative fastest at that measure: its ms / dualkv ms, so
above 1 means dualkv is faster. Files that time
the forward alone as well (forward_alone_ms: forwards back to back, not after a backward) add its
ms and TFLOP/s columns and a fourth speedup, "fwd alone"; "-" where a file predates the field.
"""
import json
import sys

GIB = 2 ** 30
BACKWARD_FLOP_RATIO = 2.5
ALTERNATIVES = ("cudnn_composition", "fa4_composition", "flex_fa4", "flex_packed")
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16"}
MEASURES = ("forward_ms", "backward_ms", "fb_ms", "forward_alone_ms")


def forward_flops(entry):
    p, r = entry["P"], entry["R"]
    lengths = r if isinstance(r, list) else [r] * entry["N"]  # ragged entries list every response
    pairs = p * (p + 1) // 2 + sum(length * p + length * (length + 1) // 2 for length in lengths)
    return 4 * entry["d"] * entry["H"] * pairs


def run_label(report):
    """'dualkv', its kernel family, 'det' for a deterministic backward: 'dualkv hopper det'."""
    words = ["dualkv", report.get("kernel_family"), "det" if report.get("deterministic", False) else None]
    return " ".join(word for word in words if word)


def collect(dualkv_reports, baselines_report):
    """{(config, dtype): {method: entry}}, every entry with "status" ("ok" when timed) and fb_ms."""
    groups = {}
    for path, report in dualkv_reports:
        label = run_label(report)
        for entry in report["results"]:
            group = groups.setdefault((entry["config"], DTYPE_SHORT.get(entry["dtype"], entry["dtype"])), {})
            name = label if label not in group else f"{label} ({path})"
            group[name] = dict(entry, status=entry.get("failure", "ok"))
            if "forward_ms" in entry:
                group[name]["fb_ms"] = entry["forward_ms"] + entry["backward_ms"]
    for entry in baselines_report["results"]:
        groups.setdefault((entry["config"], entry["dtype"]), {})[entry["baseline"]] = entry
    return groups


def method_line(name, entry, flops):
    if entry["status"] != "ok":
        reason = entry.get("reason", "")
        return f"  {name:<24} {entry['status']}" + (f" ({reason[:90]})" if reason else "")
    forward, backward = entry["forward_ms"], entry["backward_ms"]
    forward_tflops, backward_tflops = flops / forward / 1e9, BACKWARD_FLOP_RATIO * flops / backward / 1e9
    alone = entry.get("forward_alone_ms")
    alone_columns = f"{alone:9.2f} {flops / alone / 1e9:8.1f}" if alone else f"{'-':>9} {'-':>8}"
    return (f"  {name:<24} {forward:9.2f} {forward_tflops:8.1f} {backward:9.2f} {backward_tflops:8.1f} "
            f"{entry['fb_ms']:9.2f} {entry['peak_bytes'] / GIB:8.2f} {alone_columns}")


def speedups(entry, timed, best):
    """'a / b / c / d' over the fastest alternative per measure; '-' where either side lacks it."""
    def ratio(measure):
        if measure not in best or measure not in entry:
            return "    -"
        return f"{timed[best[measure]][measure] / entry[measure]:5.2f}x"
    return " / ".join(ratio(m) for m in MEASURES)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dualkv_reports = []
    for path in sys.argv[1:-1]:
        with open(path) as f:
            dualkv_reports.append((path, json.load(f)))
    with open(sys.argv[-1]) as f:
        baselines_report = json.load(f)

    for path, report in dualkv_reports:
        print(f"{run_label(report)}: {path} on {report['device']}")
    print(f"baselines: {sys.argv[-1]} on {baselines_report['device']} (torch {baselines_report['torch']})")
    print(f"  {'method':<24} {'fwd ms':>9} {'fwd TF/s':>8} {'bwd ms':>9} {'bwd TF/s':>8} {'f+b ms':>9} "
          f"{'peak GiB':>8} {'fwd1 ms':>9} {'fwd1 TF/s':>8}  speedup over the fastest alternative: "
          "fwd / bwd / f+b / fwd alone (fwd1: forwards back to back)")
    for (config, dtype), group in collect(dualkv_reports, baselines_report).items():
        flops = forward_flops(next(iter(group.values())))
        timed = {name: group[name] for name in ALTERNATIVES if group.get(name, {}).get("status") == "ok"}
        best = {}
        for measure in MEASURES:
            having = [name for name in timed if measure in timed[name]]
            if having:
                best[measure] = min(having, key=lambda name: timed[name][measure])
        print(f"{config} {dtype}: fastest alternative fwd {best.get('forward_ms', '-')}, "
              f"bwd {best.get('backward_ms', '-')}, f+b {best.get('fb_ms', '-')}, "
              f"fwd alone {best.get('forward_alone_ms', '-')}")
        for name, entry in group.items():
            line = method_line(name, entry, flops)
            if name.startswith("dualkv") and entry["status"] == "ok" and best:
                line += "  " + speedups(entry, timed, best)
            print(line)


if __name__ == "__main__":
    main()
