"""Reads per-CTA traces of the sm90 backward's KV kernel (CSV, optionally gzipped, as
cta_trace2.patch writes them: start / end times in ns, SM, steps walked, the key tile's segment
and begin, its prompt segment, KV head) and prints where the kernel's time goes: span, SM
occupancy, per-step time of prompt and response key tiles (least-squares fit duration = overhead +
steps * per_step), the tail, and how per-step time moves through the kernel (by start-time decile).
Usage: python3 analyse_cta_trace.py trace.csv[.gz] ..."""
import csv, gzip, sys
import numpy as np

for path in sys.argv[1:]:
    rows = list(csv.DictReader((gzip.open if path.endswith(".gz") else open)(path, "rt")))
    col = lambda name: np.array([float(r[name]) for r in rows])
    start, end0, end1, steps, sm = col("start"), col("end0"), col("end1"), col("steps"), col("sm").astype(int)
    prompt = col("segment") == col("prompt_segment")
    end = np.maximum(end0, end1)
    t0 = start.min()
    start, end = (start - t0) / 1e3, (end - t0) / 1e3  # microseconds
    dur = end - start
    span, busy, sms = end.max(), dur.sum(), len(set(sm))
    print(f"== {path}: {len(rows)} CTAs on {sms} SMs, span {span/1e3:.2f} ms, busy {busy/sms/span*100:.1f}% of "
          f"SM-time, {steps.sum():.0f} steps, {busy/steps.sum()*1e3:.0f} ns per step overall")
    for name, sel in (("prompt tiles", prompt), ("response tiles", ~prompt)):
        if sel.sum() < 2:
            continue
        A = np.vstack([np.ones(sel.sum()), steps[sel]]).T
        (a, b), *_ = np.linalg.lstsq(A, dur[sel], rcond=None)
        print(f"   {name}: {sel.sum()} CTAs, steps {steps[sel].min():.0f}-{steps[sel].max():.0f}, duration "
              f"{dur[sel].min():.0f}-{dur[sel].max():.0f} us, fit {a:.1f} us + {b*1e3:.0f} ns/step, "
              f"{dur[sel].sum()/sms/1e3:.2f} ms of SM-time per SM")
    per_step = dur / np.maximum(steps, 1) * 1e3
    order = np.argsort(start)
    deciles = np.array_split(order, 10)
    print("   ns per step by start-time decile (prompt / response tiles; CTAs):")
    for i, idx in enumerate(deciles):
        p, r = idx[prompt[idx]], idx[~prompt[idx]]
        fmt = lambda s: f"{np.median(per_step[s]):5.0f}" if len(s) else "    -"
        print(f"     {i}: starts {start[idx].min()/1e3:6.2f}-{start[idx].max()/1e3:6.2f} ms  {fmt(p)} / {fmt(r)}  "
              f"({len(p)} / {len(r)})")
    last = [span - end[sm == s].max() for s in set(sm)]
    print(f"   last CTA starts at {start.max()/1e3:.2f} ms; SMs idle after their last CTA: mean {np.mean(last):.0f} us, "
          f"max {np.max(last):.0f} us")
    gaps = []
    for s in set(sm):
        idx = np.argsort(start[sm == s])
        gaps.extend(start[sm == s][idx][1:] - end[sm == s][idx][:-1])
    gaps = np.array(gaps)
    print(f"   gap between consecutive CTAs on an SM: median {np.median(gaps):.2f} us, mean {gaps.mean():.2f} us, "
          f"total {gaps.sum()/sms/1e3:.3f} ms per SM")
