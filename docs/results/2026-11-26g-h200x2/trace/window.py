import json,gzip,sys
f=sys.argv[1]; pat=sys.argv[2]; idx=int(sys.argv[3])
d=json.load(gzip.open(f))
k=[e for e in d['traceEvents'] if e.get('cat') in ('kernel','gpu_memcpy','gpu_memset')]
k.sort(key=lambda e:e['ts'])
att=[e for e in k if pat in e['name'] and e['dur']>1000]
a=att[idx]; s0=a['ts']
for e in k:
    if e['ts']+e['dur']<s0-30000 or e['ts']>s0+a['dur']+30000: continue
    if e['dur']<200: continue
    print(f"{(e['ts']-s0)/1e3:8.2f} ms  {e['dur']/1e3:7.2f} ms  stream {e['args'].get('stream'):3}  grid {e['args'].get('grid')}  {e['name'][:60]}")
