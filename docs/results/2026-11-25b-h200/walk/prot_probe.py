# Perf probe (wrong dQ): each CTA reduces its step's dQ block into a slot rotated by its block index,
# inside the same head's accumulator: same traffic and footprint, no lock-step same-line contention.
f='src/cuda/sm90/backward/kernel.cuh'
s=open(f).read()
old='''      const int64_t slot = dq_accumulator_slot(step.segment, step.begin, kBlockM);
      add_dq_block('''
new='''      const int64_t slots = params.dq_accum_head_stride / (kBlockM * kHeadDim);
      const int64_t slot = (dq_accumulator_slot(step.segment, step.begin, kBlockM) + 37 * blockIdx.x) % slots;
      add_dq_block('''
assert old in s
s=s.replace(old,new)
open(f,'w').write(s)
print('prot applied')
