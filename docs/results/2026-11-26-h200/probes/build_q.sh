#!/bin/bash
# Session 13: two probes on the branch exp/dq-pairs (a18cbd4), perf only, for the next session's
# first device call. q0: the branch with the exchange switched off (every step reduces its whole
# block: the cost of the cluster launch, the 40/232 register split and the rectangle-first walk
# alone). q1: each warpgroup sends half its block to the peer with plain st.shared::cluster (no
# barriers, no waits, nothing read back) and reduces only its kept half (wrong dQ): the cost of the
# distributed-shared-memory traffic and the halved reductions without the pair's coupling.
set -e
cd /tmp/wtb
F=src/cuda/sm90/backward/kernel.cuh
for v in q0 q1; do
  git checkout -q $F
  python3 - $v <<'PY'
import sys
f='src/cuda/sm90/backward/kernel.cuh'; s=open(f).read()
if sys.argv[1]=='q0':
    old='int exchanges = work.exchange ? 0 : -1;'
    assert old in s; s=s.replace(old,'int exchanges = -1;')
else:
    start=s.index('  cutlass::arch::ClusterBarrier::wait(empty, phase ^ 1);')
    end=s.index('template <typename Config, bool kAccumulateDq>\n__device__ void consume_backward(')
    body='''  const uint32_t remote = peer_address(received + offset, peer);
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int g = kSent + i;
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(remote + kGroupBytes * i),
                 "f"(acc(4 * g)), "f"(acc(4 * g + 1)), "f"(acc(4 * g + 2)), "f"(acc(4 * g + 3))
                 : "memory");
  }
  float* thread_values = block + offset;
  CUTE_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int g = kKept + i;
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(thread_values + 512 * g),
                 "f"(acc(4 * g)), "f"(acc(4 * g + 1)), "f"(acc(4 * g + 2)), "f"(acc(4 * g + 3))
                 : "memory");
  }
}

'''
    s=s[:start]+body+s[end:]
open(f,'w').write(s)
PY
  cmake --build build -j2 --target dualkv_bench > /tmp/q_$v.log 2>&1 || { echo FAIL $v; grep -m5 error /tmp/q_$v.log; }
  mkdir -p /work/main/exp-bin/$v && cp build/bench/dualkv_bench /work/main/exp-bin/$v/
  git diff > /work/main/exp-bin/$v/$v.patch
  echo "built $v $(date)"
done
git checkout -q $F
