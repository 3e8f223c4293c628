"""FA4's sm90 backward on the responses x prompt rectangle (non-causal) and on a causal prompt,
with its chosen query tile (80 non-causal) and with 64 forced: is the 80-query tile what makes it
faster than dualkv's 64-query step? Prints the median ms of 7 and TFLOP/s counted as 5 GEMMs of
2 * pairs * d per head (S, dP, dV, dK, dQ), pairs halved for the causal piece."""
import dataclasses, statistics, torch
import flash_attn.cute.interface as fi

orig = fi._tile_size_bwd_sm90
def forced(m):
    def f(head_dim, head_dim_v, causal, local, sparse_block_size_q=None):
        cfg = orig(head_dim, head_dim_v, causal, local, sparse_block_size_q)
        if m is not None:
            cfg = dataclasses.replace(cfg, m_block_size=m, dQ_swapAB=(m % 64 != 0))
        return cfg
    return f

def bench(fn, reps=7):
    for _ in range(2): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

torch.manual_seed(0)
H, Hk, d = 32, 8, 128
dt = torch.bfloat16
for (n_resp, P) in [(28, 4096), (28, 16384)]:
    R = 2048
    for name, tq, tk, causal in [("rect", n_resp * R, P, False), ("prompt", P, P, True)]:
        q = torch.randn(tq, H, d, device="cuda", dtype=dt)
        k = torch.randn(tk, Hk, d, device="cuda", dtype=dt)
        v = torch.randn(tk, Hk, d, device="cuda", dtype=dt)
        do = torch.randn(tq, H, d, device="cuda", dtype=dt)
        cq = torch.tensor([0, tq], device="cuda", dtype=torch.int32)
        ck = torch.tensor([0, tk], device="cuda", dtype=torch.int32)
        vl = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=tq, max_seqlen_k=tk)
        scale = d ** -0.5
        out, lse, *_ = fi._flash_attn_fwd(q, k, v, softmax_scale=scale, causal=causal, return_lse=True, **vl)
        pairs = tq * tk * (0.5 if causal else 1.0)
        flops = 5 * 2 * pairs * d * H
        for m in (None, 64, 80):
            if causal and m == 80: continue
            fi._tile_size_bwd_sm90 = forced(m)
            try:
                ms = bench(lambda: fi._flash_attn_bwd(q, k, v, out, do, lse, scale, causal, **vl))
                print(f"N{n_resp}_P{P} {name:6s} tile_m={m or 'default'}: {ms:8.3f} ms {flops/ms/1e9:7.1f} TF/s", flush=True)
            except Exception as e:
                print(f"N{n_resp}_P{P} {name} tile_m={m}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        fi._tile_size_bwd_sm90 = orig
        del q, k, v, do, out, lse
        torch.cuda.empty_cache()
