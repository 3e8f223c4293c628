"""Per-kernel GEMM (nvjet) time of the same rank under both methods: same kernels, same shapes."""
import collections, gzip, json, sys


def totals(path):
    time, calls = collections.Counter(), collections.Counter()
    for e in json.load(gzip.open(path))['traceEvents']:
        if e.get('cat') == 'kernel' and 'nvjet' in e['name']:
            time[e['name'][:50]] += e['dur']
            calls[e['name'][:50]] += 1
    return time, calls


for rank in (0, 1):
    a, na = totals(f'dualkv_rank{rank}.json.gz')
    b, nb = totals(f'flex_packed_rank{rank}.json.gz')
    print(f'rank {rank}: all GEMMs dualkv {sum(a.values()) / 1e6:.3f} s, flex_packed {sum(b.values()) / 1e6:.3f} s')
    for k in sorted(a, key=lambda k: -a[k]):
        if a[k] > 5e4:
            print(f'  {k:50s} {na[k]:4d} calls: dualkv {a[k] / 1e3:8.1f} ms, flex_packed {b[k] / 1e3:8.1f} ms ({a[k] / b[k] - 1:+.1%})')
