"""Median SM clock and power of nvidia-smi samples (CSV, no header) between start/end marks."""
import datetime
import statistics
import sys


def when(text):
    return datetime.datetime.strptime(text.strip()[:23], "%Y/%m/%d %H:%M:%S.%f")


samples = []
for row in open(sys.argv[1]):
    fields = row.split(",")
    if len(fields) < 5 or "MHz" not in fields[1]:
        continue
    samples.append((when(fields[0]), float(fields[1].split()[0]), float(fields[2].split()[0]), "Not" not in fields[4]))
marks = {}
for line in open(sys.argv[2]):
    name, stamp = line.split(" ", 1)
    marks[name] = when(stamp)
for phase in [n[: -len("_start")] for n in marks if n.endswith("_start")]:
    inside = [s for s in samples if marks[phase + "_start"] <= s[0] <= marks[phase + "_end"] and s[2] > 300]
    if not inside:
        print(phase, "no busy samples")
        continue
    clocks = sorted(s[1] for s in inside)
    print(f"{phase}: {len(inside)} busy samples, clock MHz median {statistics.median(clocks):.0f} "
          f"(p10 {clocks[len(clocks) // 10]:.0f}, p90 {clocks[9 * len(clocks) // 10]:.0f}), power W median "
          f"{statistics.median(s[2] for s in inside):.0f}, power cap active in {sum(s[3] for s in inside)}")
