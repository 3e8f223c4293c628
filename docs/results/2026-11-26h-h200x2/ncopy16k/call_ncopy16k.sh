#!/bin/bash
# Session 20, two H200s (issue 12): the N-copy FlashAttention baseline of the 36-layer 2-GPU grid
# at P = 16K, which session 14 did not run (docs/perf.md, "The 2-GPU grid at 36 layers"): FSDP2,
# one group per rank, one timed step after one warm-up, the micro-batch the one-GPU fit search
# found (N = 8: 2, N = 16 and 32: 4), unfused as the rest of that grid. Usage: call_ncopy16k.sh
# "N:micro-batch ..." (the extension is built unless the warm machine still has it).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
if ! python3 -c "import dualkv, sys; sys.exit(0 if dualkv.__file__ else 1)" 2>/dev/null; then
  python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
      -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1
  echo "build rc $? at $SECONDS s" >> $LOG
fi
for point in $1; do
  n=${point%:*}; mb=${point#*:}
  timeout 400 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 16384 --responses $n \
    --warmup 1 --repeats 1 --methods flash_ncopy --micro-batch $mb --out $OUT/flash_p16k_n$n > $OUT/flash_p16k_n$n.log 2>&1
  echo "flash P=16K N=$n mb=$mb rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/flash_p16k_n$n.log >> $LOG
done
