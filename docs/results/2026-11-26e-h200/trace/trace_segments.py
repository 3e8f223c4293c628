"""Median cycles between the 12 trace points of exp/bwd-trace (CTA 0, steps 256-319), per warpgroup.

usage: python3 trace_segments.py trace_28x16384.txt
Lines: TRACE <warpgroup> <step> <12 clock values relative to warpgroup 0's first point>.
"""
import statistics
import sys

NAMES = ["Q/dO wait", "S^T+dP^T issue", "S wait", "P math", "dP wait", "dS math", "dS store+dV issue",
         "dS barrier", "dQ issue+dV wait", "dK issue+dQ wait", "dQ reductions issue", "to next step"]
rows = {}
for line in open(sys.argv[1]):
    fields = line.split()
    rows[(int(fields[1]), int(fields[2]))] = [int(x) for x in fields[3:]]
steps = sorted({s for _, s in rows})[:-1]
for wg in (0, 1):
    segments = [[] for _ in NAMES]
    for s in steps:
        e, following = rows[(wg, s)], rows[(wg, s + 1)][0]
        for i in range(11):
            segments[i].append(e[i + 1] - e[i])
        segments[11].append(following - e[11])
    step = statistics.median(rows[(wg, s + 1)][0] - rows[(wg, s)][0] for s in steps)
    print(f"warpgroup {wg}: step {step:.0f} cycles")
    for name, values in zip(NAMES, segments):
        print(f"  {name:22s} {statistics.median(values):6.0f}")
