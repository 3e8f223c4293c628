"""Session 23: FA4's sm90 backward on the responses x prompt rectangle of (N, P) = (28, 16K)
(57,344 x 16,384 keys, non-causal, 32 / 8 heads, head_dim 128, bf16), its query tile forced to 64:
then its step has dualkv's shape (S^T, dP^T and dQ as 64x64x16 SS wgmma, dV and dK as 64x128x16
RS). `--time` prints the median ms of 7 at tile 64 and at FA4's default tile (80) and TFLOP/s over
the 5 GEMMs; `--profile` runs 4 backwards at tile 64 for ncu (launch-skip 2)."""
import dataclasses, statistics, sys, torch
import flash_attn.cute.interface as fi

original = fi._tile_size_bwd_sm90


def tile(m):
    def forced(head_dim, head_dim_v, causal, local, sparse_block_size_q=None):
        config = original(head_dim, head_dim_v, causal, local, sparse_block_size_q)
        return config if m is None else dataclasses.replace(config, m_block_size=m, dQ_swapAB=(m % 64 != 0))
    return forced


torch.manual_seed(0)
H, Hk, d, tq, tk = 32, 8, 128, 28 * 2048, 16384
q = torch.randn(tq, H, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn(tk, Hk, d, device="cuda", dtype=torch.bfloat16)
v = torch.randn(tk, Hk, d, device="cuda", dtype=torch.bfloat16)
do = torch.randn(tq, H, d, device="cuda", dtype=torch.bfloat16)
lengths = dict(cu_seqlens_q=torch.tensor([0, tq], device="cuda", dtype=torch.int32),
               cu_seqlens_k=torch.tensor([0, tk], device="cuda", dtype=torch.int32), max_seqlen_q=tq, max_seqlen_k=tk)
scale = d ** -0.5
out, lse, *_ = fi._flash_attn_fwd(q, k, v, softmax_scale=scale, causal=False, return_lse=True, **lengths)
backward = lambda: fi._flash_attn_bwd(q, k, v, out, do, lse, scale, False, **lengths)
if "--profile" in sys.argv:
    fi._tile_size_bwd_sm90 = tile(64)
    for _ in range(4):
        backward()
    torch.cuda.synchronize()
else:
    flops = 5 * 2 * tq * tk * d * H
    for m in (64, None, 64):
        fi._tile_size_bwd_sm90 = tile(m)
        for _ in range(2):
            backward()
        times = []
        for _ in range(7):
            start, end = torch.cuda.Event(True), torch.cuda.Event(True)
            start.record(); backward(); end.record(); torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        ms = statistics.median(times)
        print(f"rectangle (28, 16K) tile_m={m or 'default'}: {ms:8.3f} ms {flops / ms / 1e9:7.1f} TF/s", flush=True)
