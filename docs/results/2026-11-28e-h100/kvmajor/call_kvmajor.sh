#!/bin/bash
# Session 35, one H100 (issue 11): does the rectangle leg reach FA4's rectangle rate when a KV head's key
# tiles run together? The split probe binary of docs/results/2026-11-28c-h100/split_probe/ plus
# kvmajor.patch (branch exp/split-probe): DUALKV_PROBE_WALK 4 = probe 1 (prompt key tiles walk only
# the response rectangle) with CTAs KV-head-major (a KV head's key tiles consecutive in blockIdx, as
# FA4's grid keeps a query head's); 5 = main's walk, KV-head-major. Two alternating rounds of
# dualkv_bench (bf16 backward), then ncu's DRAM bytes and L2 hit rate of the KV kernel at (16, 64K)
# for probes 1 and 4. Perf probes: wrong gradients by design.
# Carry: exp-xz/probe2.tar.xz.
cd "$(dirname "$0")/../../../.."
mkdir -p exp-bin/probe2 && tar xJf exp-xz/probe2.tar.xz -C exp-bin/probe2
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
for round in 1 2; do
  for w in 0 5 1 4; do
    echo "== probe $w, round $round" >> $LOG
    DUALKV_PROBE_WALK=$w exp-bin/probe2/dualkv_bench --kernel-family hopper --configs 28x16384,16x32768,16x65536 \
      --dtype bf16 2>&1 | grep -E "^N[0-9]" | sort -u >> $LOG
  done
done
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for w in 1 4; do
  echo "== ncu probe $w (16, 64K)" >> $LOG
  DUALKV_PROBE_WALK=$w timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:backward_kv_kernel \
    --launch-skip 2 --launch-count 1 exp-bin/probe2/dualkv_bench --configs 16x65536 --dtype bf16 \
    --kernel-family hopper --repeats 10 --warmups 0 2>&1 | grep -E "duration|cycles_elapsed|dram__|lts__|ERR" >> $LOG
done
echo "done at $SECONDS s" >> $LOG
