"""FA4's sm90 backward on the three pieces of the FA4 composition, each alone, at its own default
tiles: the responses x prompt rectangle (non-causal), the causal prompt, and the N responses each
causal (varlen). Median ms of 7 (its pre- and post-processing included) and TFLOP/s on the pairs
each piece computes (5 GEMMs of 2 * pairs * d per head), to set beside dualkv's split probe
(docs/results/2026-11-28c-h100/split_probe/) on the same chip."""
import statistics, sys, torch
import flash_attn.cute.interface as fi

def bench(fn, reps=7):
    for _ in range(2): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

torch.manual_seed(0)
H, Hk, d, R = 32, 8, 128, 2048
dt = torch.bfloat16
for item in sys.argv[1:]:
    n_resp, P = map(int, item.split("x"))
    pieces = [("rect", [0, n_resp * R], [0, P], False), ("prompt", [0, P], [0, P], True),
              ("responses", [i * R for i in range(n_resp + 1)], [i * R for i in range(n_resp + 1)], True)]
    for name, cuq, cuk, causal in pieces:
        tq, tk = cuq[-1], cuk[-1]
        q = torch.randn(tq, H, d, device="cuda", dtype=dt)
        k = torch.randn(tk, Hk, d, device="cuda", dtype=dt)
        v = torch.randn(tk, Hk, d, device="cuda", dtype=dt)
        do = torch.randn(tq, H, d, device="cuda", dtype=dt)
        cq = torch.tensor(cuq, device="cuda", dtype=torch.int32)
        ck = torch.tensor(cuk, device="cuda", dtype=torch.int32)
        lq = max(b - a for a, b in zip(cuq, cuq[1:]))
        lk = max(b - a for a, b in zip(cuk, cuk[1:]))
        vl = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=lq, max_seqlen_k=lk)
        scale = d ** -0.5
        out, lse, *_ = fi._flash_attn_fwd(q, k, v, softmax_scale=scale, causal=causal, return_lse=True, **vl)
        pairs = sum((b - a) * (d_ - c_) * (0.5 if causal else 1.0)
                    for (a, b), (c_, d_) in zip(zip(cuq, cuq[1:]), zip(cuk, cuk[1:])))
        flops = 5 * 2 * pairs * d * H
        ms = bench(lambda: fi._flash_attn_bwd(q, k, v, out, do, lse, scale, causal, **vl))
        print(f"N{n_resp}_P{P} {name:9s}: {ms:8.3f} ms {flops / ms / 1e9:7.1f} TF/s", flush=True)
        del q, k, v, do, out, lse
        torch.cuda.empty_cache()
