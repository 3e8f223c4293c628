"""Session 24 (clock2, a copy of ../clock/rect_clock.py that also prints the loop's wall-clock
window for clock_summary.py): FA4's sm90 backward on the responses x prompt rectangle of (N, P) = (28, 16K)
(57,344 queries x 16,384 keys, non-causal, 32 / 8 heads, head_dim 128, bf16) at query tile
`--tile` (64: dualkv's step shape; 80: FA4's own), run back to back `--runs` times (ncu profiles
the third with --launch-skip 2; nvidia-smi samples the GPU's clock and power meanwhile). The
same inputs as ../../2026-11-26k-h200/fa4_q64/rect64.py."""
import argparse, dataclasses, time, torch
import flash_attn.cute.interface as fi

parser = argparse.ArgumentParser()
parser.add_argument("--tile", type=int, choices=(64, 80), required=True)
parser.add_argument("--runs", type=int, default=40)
args = parser.parse_args()
original = fi._tile_size_bwd_sm90


def forced(head_dim, head_dim_v, causal, local, sparse_block_size_q=None):
    config = original(head_dim, head_dim_v, causal, local, sparse_block_size_q)
    return dataclasses.replace(config, m_block_size=args.tile, dQ_swapAB=(args.tile % 64 != 0))


fi._tile_size_bwd_sm90 = forced
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
start, end = torch.cuda.Event(True), torch.cuda.Event(True)
window_start = time.time()
start.record()
for _ in range(args.runs):
    fi._flash_attn_bwd(q, k, v, out, do, lse, scale, False, **lengths)
end.record()
torch.cuda.synchronize()
print(f"window {window_start:.3f} {time.time():.3f}")
print(f"tile {args.tile}: {args.runs} backwards, {start.elapsed_time(end) / args.runs:.3f} ms each", flush=True)
