import json,gzip,sys,collections
sys.path.insert(0,'/work/main/exp')
from profile_step import category
def union(iv):
    tot,end=0.0,-1e30
    for s,e in sorted(iv):
        if e<=end: continue
        tot+=e-max(s,end); end=e
    return tot
for f in sys.argv[1:]:
    d=json.load(gzip.open(f))
    k=[e for e in d['traceEvents'] if e.get('cat') in ('kernel','gpu_memcpy','gpu_memset')]
    sp=[(e['ts'],e['ts']+e['dur'],category(e['name'])) for e in k]
    t0=min(s for s,_,_ in sp); t1=max(e for _,e,_ in sp)
    allu=union([(s,e) for s,e,_ in sp]); cu=union([(s,e) for s,e,c in sp if c!='nccl'])
    tot=collections.Counter()
    for s,e,c in sp: tot[c]+=e-s
    print(f, f"span {(t1-t0)/1e6:.3f} s  any {allu/1e6:.3f}  compute {cu/1e6:.3f}  nccl-only {(allu-cu)/1e6:.3f}  gaps {(t1-t0-allu)/1e6:.3f}", {c:round(v/1e6,3) for c,v in tot.most_common()})
