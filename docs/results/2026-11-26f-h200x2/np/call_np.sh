#!/bin/bash
# Session 18, two H200s, branch exp/fwd-np (the Hopper forward with one CTA per work item instead
# of a persistent grid with a static schedule): the 2-GPU step with it (dualkv and FlexAttention,
# as docs/results/2026-11-26d-h200/prepared_x2/call_x2_step.sh runs it); the GPU suite of its
# build; the forward against main's in dualkv_bench, two alternating rounds, on GPU 0.
# Carry: .cutlass and exp-xz/np18.tar.xz, which holds exp-bin/main18/dualkv_bench (main),
# build/cuda-sm90/bench/dualkv_bench and
# build/cuda-sm90/tests/cuda/dualkv_cuda_tests (exp/fwd-np).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
tar xJf exp-xz/np18.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 330 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 \
  --responses 32 --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x2_np \
  > $OUT/step_x2_np.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x2_np.log >> $LOG
build/cuda-sm90/tests/cuda/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_np.log 2>&1; echo "suite rc $? at $SECONDS s" >> $LOG
tail -2 $OUT/suite_np.log >> $LOG
for round in 1 2; do
  for variant in main np; do
    bin=exp-bin/main18/dualkv_bench; [ $variant = np ] && bin=build/cuda-sm90/bench/dualkv_bench
    echo "== round $round $variant" >> $OUT/bench.txt
    $bin --configs 28x4096,32x8192,16x65536 --dtype bf16 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
