import csv, gzip, sys
rows = list(csv.reader(gzip.open(sys.argv[1], 'rt')))
cols = rows[1]
data = [dict(zip(cols, r)) for r in rows[2:] if len(r) == len(cols)]
base = int(data[0]['Address'], 16)
reasons = [c for c in cols if c.startswith('stall_') and 'Not Issued' not in c]
tot = sum(int(d['Warp Stall Sampling (All Samples)'] or 0) for d in data)
print('total samples', tot, 'instructions', len(data))
out = []
for d in data:
    s = int(d['Warp Stall Sampling (All Samples)'] or 0)
    ex = int(d['Instructions Executed'] or 0)
    top = sorted(((int(d[r] or 0), r[6:]) for r in reasons), reverse=True)[:3]
    out.append((int(d['Address'],16)-base, ex, s, d['Source'].strip(), top))
mode = sys.argv[2] if len(sys.argv) > 2 else 'all'
if mode == 'all':
    for o, ex, s, src, top in out:
        print(f"{o:6x} {ex:>11} {s/tot*100:6.2f}% {src[:70]:70s} {' '.join(f'{r}:{n}' for n, r in top if n)}")
else:
    # aggregate by executed count (warp role / loop nest)
    from collections import defaultdict
    g = defaultdict(lambda: [0, 0, None, None])
    for o, ex, s, src, top in out:
        e = g[ex]; e[0] += s; e[1] += 1; e[2] = o if e[2] is None else e[2]; e[3] = o
    for ex, (s, n, a, b) in sorted(g.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"exec {ex:>11} instrs {n:5d} range {a:6x}-{b:6x} samples {s/tot*100:6.2f}%")
    agg = defaultdict(int)
    for d in data:
        for r in reasons: agg[r] += int(d[r] or 0)
    print(sorted(((v*100/tot, k) for k, v in agg.items()), reverse=True)[:12])
