#!/usr/bin/env python3
"""One table from dualkv_bench's and baselines.py's JSON files (same device run).

  python3 bench/report_table.py DUALKV_JSON BASELINES_JSON

Per configuration and dtype: dualkv forward/backward ms, TFLOP/s (deduplicated FLOPs), peak GiB
and peak over the bytes of Q, K, V, O, dO, dQ, dK, dV; then each baseline's forward+backward ms
and dualkv's speedup over it (baseline f+b time / dualkv f+b time).
"""
import json
import sys

GIB = 2 ** 30


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        ours = json.load(f)
    with open(sys.argv[2]) as f:
        theirs = json.load(f)
    baselines = list(dict.fromkeys(entry["baseline"] for entry in theirs["results"]))
    by_key = {(e["config"], e["dtype"], e["baseline"]): e for e in theirs["results"]}
    dtype_short = {"float16": "fp16", "bfloat16": "bf16"}

    header = f"{'config':<12} {'dtype':<5} {'fwd ms':>8} {'bwd ms':>8} {'fwd TF/s':>8} {'bwd TF/s':>8} " \
             f"{'peak GiB':>8} {'peak/T':>6}"
    header += "".join(f" | {name + ' f+b ms':>22} {'speedup':>7}" for name in baselines)
    print(f"dualkv on {ours['device']}; baselines on {theirs['device']} (torch {theirs['torch']})")
    print(header)
    for r in ours["results"]:
        dtype = dtype_short.get(r["dtype"], r["dtype"])
        if "failure" in r:
            line = f"{r['config']:<12} {dtype:<5} {r['failure']:>60}"
            ours_fb = None
        else:
            ours_fb = r["forward_ms"] + r["backward_ms"]
            line = (f"{r['config']:<12} {dtype:<5} {r['forward_ms']:8.2f} {r['backward_ms']:8.2f} "
                    f"{r['forward_tflops']:8.1f} {r['backward_tflops']:8.1f} {r['peak_bytes'] / GIB:8.2f} "
                    f"{r['peak_bytes'] / r['tensor_bytes']:6.2f}")
        for name in baselines:
            entry = by_key.get((r["config"], dtype, name))
            if entry is None:
                line += f" | {'not run':>22} {'':>7}"
            elif entry["status"] != "ok":
                line += f" | {entry['status']:>22} {'':>7}"
            else:
                ratio = f"{entry['fb_ms'] / ours_fb:6.2f}x" if ours_fb else ""
                line += f" | {entry['fb_ms']:22.1f} {ratio:>7}"
        print(line)


if __name__ == "__main__":
    main()
