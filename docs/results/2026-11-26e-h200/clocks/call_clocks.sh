#!/bin/bash
# Session 17: SM clock, power and throttle reasons sampled every 20 ms while main's Hopper kernels
# run (16, 64K) bf16: forward/backward alternating for 30 repeats, then 30 forwards alone.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=power.limit,enforced.power.limit,clocks.max.sm,clocks.applications.graphics --format=csv >> $LOG 2>&1
Q=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown
nvidia-smi --query-gpu=$Q --format=csv -lms 20 > $OUT/smi.csv 2>&1 &
SMI=$!
sleep 1
echo "bench start $(date +%H:%M:%S.%N)" >> $LOG
exp-bin/final/dualkv_bench --kernel-family hopper --configs 16x65536 --dtype bf16 --repeats 30 2>&1 | sed -n "/^config/,/^$/p" | head -3 >> $LOG
echo "bench end $(date +%H:%M:%S.%N)" >> $LOG
sleep 1
kill $SMI
python3 - "$OUT/smi.csv" >> $LOG <<'PY'
import csv, sys, statistics
rows = list(csv.reader(open(sys.argv[1])))
head, data = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
print("columns:", head)
clock = [float(r[1].split()[0]) for r in data]
power = [float(r[2].split()[0]) for r in data if r[2].split()[0].replace('.', '').isdigit()]
busy = [c for c in clock if c > 500]
print("samples", len(data), "clock MHz: min", min(busy), "median", statistics.median(busy), "max", max(busy))
print("power W: median", statistics.median(power) if power else None, "max", max(power) if power else None)
for i in range(4, len(head)):
    print(head[i], sum(1 for r in data if 'Active' in r[i] and 'Not' not in r[i]), "of", len(data))
PY
