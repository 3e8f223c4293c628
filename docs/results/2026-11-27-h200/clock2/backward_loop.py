"""Session 24: dualkv's Hopper backward at (N, P) = (28, 16K) (R = 2048, 32 / 8 heads, head_dim 128,
bf16) run back to back `--runs` times after one forward, through torch.ops.dualkv (pre-pass, KV
kernel and dQ conversion per backward, as in training): the backward at the clock its own power
draw sets, which dualkv_bench's alternating loop does not show. Prints the loop's wall-clock window
for clock_summary.py and the mean time per backward."""
import argparse, time, torch
import dualkv

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=60)
args = parser.parse_args()
torch.manual_seed(0)
layout = dualkv.Layout.from_lengths([16384], [[2048] * 28])
tokens = 16384 + 28 * 2048
q = torch.randn(tokens, 32, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(tokens, 8, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn(tokens, 8, 128, device="cuda", dtype=torch.bfloat16)
dout = torch.randn(tokens, 32, 128, device="cuda", dtype=torch.bfloat16)
cu_seqlens, cu_groups = layout._operator_offsets()
scale = 128 ** -0.5
out, lse = torch.ops.dualkv.attention_forward(q, k, v, cu_seqlens, cu_groups, scale, False, "hopper")
backward = lambda: torch.ops.dualkv.attention_backward(dout, q, k, v, out, lse, cu_seqlens, cu_groups, scale, False, "hopper")
for _ in range(3):
    backward()
torch.cuda.synchronize()
start, end = torch.cuda.Event(True), torch.cuda.Event(True)
window_start = time.time()
start.record()
for _ in range(args.runs):
    backward()
end.record()
torch.cuda.synchronize()
print(f"window {window_start:.3f} {time.time():.3f}")
print(f"dualkv backward (28, 16K): {args.runs} back to back, {start.elapsed_time(end) / args.runs:.3f} ms each", flush=True)
