"""Reads trace_<N>x<P>.csv.gz (per-CTA start / end times of the KV kernel) and prints where the
kernel's time goes: span, SM occupancy, per-step time of prompt and response key tiles (a least-
squares fit duration = overhead + steps * per_step), and the tail after the last CTA starts.
Responses are 2048 tokens (dualkv_bench), 4 query heads per KV head, 64-query steps."""
import csv, gzip, sys
import numpy as np

R, G, M = 2048, 4, 64
for path in sys.argv[1:]:
    n, p = map(int, path.split("trace_")[1].split(".")[0].split("x"))
    rows = list(csv.DictReader(gzip.open(path, "rt")))
    start = np.array([int(r["start"]) for r in rows], dtype=np.float64)
    end = np.array([max(int(r["end0"]), int(r["end1"])) for r in rows], dtype=np.float64)
    sm = np.array([int(r["sm"]) for r in rows])
    prompt = np.array([int(r["segment"]) == int(r["prompt_segment"]) for r in rows])
    steps = []
    for r in rows:
        seg, begin = int(r["segment"]), int(r["begin"])
        if seg == int(r["prompt_segment"]):
            steps.append(G * ((p - begin // M * M) // M + n * R // M))
        else:
            rel = begin - (p + (seg - 1) * R)
            steps.append(G * ((R - rel // M * M) // M))
    steps = np.array(steps, dtype=np.float64)
    t0 = start.min()
    start, end = (start - t0) / 1e3, (end - t0) / 1e3  # microseconds
    dur = end - start
    span = end.max()
    busy = dur.sum()
    sms = len(set(sm))
    print(f"== {n}x{p}: {len(rows)} CTAs on {sms} SMs, span {span/1e3:.2f} ms, busy {busy/sms/span*100:.1f}% of SM-time, "
          f"{steps.sum():.0f} steps, {busy/steps.sum()*1e3:.0f} ns per step overall")
    for name, sel in (("prompt tiles", prompt), ("response tiles", ~prompt)):
        A = np.vstack([np.ones(sel.sum()), steps[sel]]).T
        (a, b), *_ = np.linalg.lstsq(A, dur[sel], rcond=None)
        print(f"   {name}: {sel.sum()} CTAs, steps {steps[sel].min():.0f}-{steps[sel].max():.0f}, duration "
              f"{dur[sel].min():.0f}-{dur[sel].max():.0f} us, fit {a:.1f} us + {b*1e3:.0f} ns/step, "
              f"{dur[sel].sum()/sms/1e3:.2f} ms of SM-time per SM")
    last_start = start.max()
    print(f"   last CTA starts at {last_start/1e3:.2f} ms; SMs idle after their last CTA: mean "
          f"{np.mean([span - end[sm == s].max() for s in set(sm)]):.0f} us, max "
          f"{np.max([span - end[sm == s].max() for s in set(sm)]):.0f} us")
    gaps = []
    for s in set(sm):
        idx = np.argsort(start[sm == s])
        st, en = start[sm == s][idx], end[sm == s][idx]
        gaps.extend(st[1:] - en[:-1])
    gaps = np.array(gaps)
    print(f"   gap between consecutive CTAs on an SM: median {np.median(gaps):.2f} us, mean {gaps.mean():.2f} us, "
          f"total {gaps.sum()/sms/1e3:.3f} ms per SM")
