import json,gzip,collections,sys,statistics
def short(n):
    for key in ['forward_kernel','backward_kv_kernel','nccl','nvjet','triton','flex','attention']:
        if key in n.lower(): 
            if key=='nccl': return n.split('(')[0][:40]
            return key
    return n[:40]
def load(f):
    d=json.load(gzip.open(f))
    return [e for e in d['traceEvents'] if e.get('cat') in ('kernel','gpu_memcpy','gpu_memset')]
f=sys.argv[1]; pat=sys.argv[2]
k=load(f)
att=[e for e in k if pat in e['name']]
others=[e for e in k if pat not in e['name']]
durs=[e['dur'] for e in att]
print(f, pat, len(att), 'total ms', sum(durs)/1e3, 'median us', statistics.median(durs), 'min', min(durs), 'max', max(durs))
print('attention stream(s)', collections.Counter(e['args']['stream'] for e in att))
nccl=[e for e in k if 'nccl' in e['name'].lower()]
print('nccl grid/block', collections.Counter((tuple(e['args']['grid']),tuple(e['args']['block']),e['args'].get('shared memory'),e['args'].get('registers per thread')) for e in nccl))
print('nccl streams', collections.Counter(e['args']['stream'] for e in nccl))
rows=[]
for e in att:
    s,t=e['ts'],e['ts']+e['dur']
    ov=collections.Counter()
    for o in others:
        if o['args'].get('stream')==e['args']['stream']: continue
        a,b=max(s,o['ts']),min(t,o['ts']+o['dur'])
        if b>a: ov[short(o['name'])]+=b-a
    rows.append((e['dur'],dict(ov)))
for d,ov in rows: print(f"{d:9.0f}", {k:round(v) for k,v in ov.items()})
