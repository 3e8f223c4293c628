#!/bin/bash
# Session 35 (issue 11): what would splitting a prompt key tile's walk into its two legs gain?
# Perf probe, wrong dK/dV/dQ by design. The probe binary (branch exp/split-probe, patch
# split_probe.patch) reads DUALKV_PROBE_WALK: unset or 0 = main's walk; 1 = prompt key tiles walk
# only the response rectangle (equal-length CTAs, as the FA4 composition's rectangle kernel), response
# key tiles as in main; 2 = prompt key tiles walk only their causal prompt leg, response key tiles
# one step; 3 = every key tile one step (the fixed costs: pre-pass, dQ zeroing and conversion,
# per-CTA prologue and epilogue). A split kernel would take about t1 + t2 - t3.
# Two alternating rounds of dualkv_bench (bf16 backward) against main's binary, SM clock and power
# sampled by nvidia-smi every 50 ms over each run.
# Carry: exp-xz/s35.tar.xz (main) and exp-xz/probe.tar.xz.
cd "$(dirname "$0")/../../../.."
for b in s35 probe; do mkdir -p exp-bin/$b && tar xJf exp-xz/$b.tar.xz -C exp-bin/$b; done
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
CONFIGS=28x4096,28x16384,16x32768,16x65536
run() {  # name binary probe
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 > /tmp/smi_$1.txt &
  local smi=$!
  DUALKV_PROBE_WALK=$3 exp-bin/$2/dualkv_bench --kernel-family hopper --configs $CONFIGS --dtype bf16 > /tmp/bench_$1.txt 2>&1
  kill $smi
  echo "== $1 (probe $3) rc at $SECONDS s; clock MHz / power W medians: $(python3 -c "
import statistics, sys
rows = [l.split(',') for l in open('/tmp/smi_$1.txt') if ',' in l]
c = [float(r[0]) for r in rows][20:]; p = [float(r[1]) for r in rows][20:]
print(statistics.median(c), statistics.median(p))")" >> $LOG
  grep -E "^N[0-9]" /tmp/bench_$1.txt >> $LOG
}
for round in 1 2; do
  run main_r$round s35 0
  run p0_r$round probe 0
  run p1_r$round probe 1
  run p2_r$round probe 2
  run p3_r$round probe 3
done
(cd /tmp && tar czf $OUT/raw.tgz bench_*.txt smi_*.txt)
