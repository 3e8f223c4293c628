"""Session 24: a composition's whole backward (bench/baselines.py: FA4's or cuDNN's three pieces and
the gradient sums, as timed beside dualkv) at (N, P) = (28, 16K) (R = 2048, 32 / 8 heads, head_dim
128, bf16), run back to back `--runs` times after one forward, so that nvidia-smi sees the clock
its own power draw sets. Prints the loop's wall-clock window for ../clock2/clock_summary.py."""
import argparse, pathlib, sys, time, torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "bench"))
import baselines  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--baseline", choices=("fa4_composition", "cudnn_composition"), required=True)
parser.add_argument("--runs", type=int, default=40)
args = parser.parse_args()
problem = baselines.Problem(16384, [2048] * 28, 32, 8, 128, torch.bfloat16)
method = next(b for b in baselines.BASELINES if b.name == args.baseline)(problem)
state = method.forward()
for _ in range(3):
    method.backward(state)
torch.cuda.synchronize()
start, end = torch.cuda.Event(True), torch.cuda.Event(True)
window_start = time.time()
start.record()
for _ in range(args.runs):
    method.backward(state)
end.record()
torch.cuda.synchronize()
print(f"window {window_start:.3f} {time.time():.3f}")
print(f"{args.baseline} backward (28, 16K): {args.runs} back to back, {start.elapsed_time(end) / args.runs:.3f} ms each",
      flush=True)
