#!/bin/bash
# Session 13 probes on main's tree (perf only, wrong dQ): p0b = no dQ reductions but the dQ GEMM
# kept (the reductions sit behind a runtime condition that never holds: softmax_scale < 0);
# pst = the 8 reductions replaced by plain 16-byte stores to the same addresses.
set -e
cd /work/main
F=src/cuda/sm90/backward/kernel.cuh
for v in p0b pst; do
  git checkout -q $F
  python3 - $v <<'PY'
import sys
f='src/cuda/sm90/backward/kernel.cuh'; s=open(f).read()
v=sys.argv[1]
if v=='p0b':
    old='''      add_dq_block(
          p.dq_accum + dq_block_offset(step.head, params.dq_accum_head_stride, slot, kBlockM, kHeadDim, warpgroup),
          acc_dq, warpgroup_thread);'''
    assert old in s
    s=s.replace(old,'      if (p.softmax_scale < 0.f)\n'+old)
else:
    old='asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};"'
    assert old in s
    s=s.replace(old,'asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};"')
open(f,'w').write(s)
PY
  cmake --build build/cuda-sm90 -j2 --target dualkv_bench > /tmp/probe_$v.log 2>&1 || { echo FAIL $v; tail -20 /tmp/probe_$v.log; }
  mkdir -p exp-bin/$v && cp build/cuda-sm90/bench/dualkv_bench exp-bin/$v/
  echo "built $v $(date)"
done
git checkout -q $F
cmake --build build/cuda-sm90 -j2 --target dualkv_bench > /tmp/probe_main_rebuild.log 2>&1
echo "rebuilt main $(date)"
