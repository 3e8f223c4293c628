"""Session 24: median SM clock and power of nvidia-smi samples inside a run's window.

  python3 clock_summary.py NAME SAMPLES.csv RUN_OUTPUT.txt

SAMPLES.csv: `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits
-lms 20`; RUN_OUTPUT.txt holds a line `window START END` (Unix seconds). The first second of the
window is left out (the clock settles at the power cap within it)."""
import datetime, statistics, sys

name, samples_path, run_path = sys.argv[1:4]
window = next(line.split()[1:3] for line in open(run_path) if line.startswith("window "))
begin, end = float(window[0]) + 1.0, float(window[1])
clocks, powers = [], []
for line in open(samples_path):
    stamp, clock, power = [field.strip() for field in line.split(",")[:3]]
    when = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    if begin <= when <= end:
        clocks.append(float(clock))
        powers.append(float(power))
print(f"{name}: {len(clocks)} samples over {end - begin:.1f} s: SM clock median {statistics.median(clocks):.0f} MHz "
      f"(min {min(clocks):.0f}, max {max(clocks):.0f}), power median {statistics.median(powers):.0f} W")
