"""Session 30 probe (issue 12): why the fused RoPE of dualkv.training.fused runs far below DRAM
bandwidth in the step (session 19's trace: 1.15 ms for q at T = 45.8K, about 0.65 TB/s), and which
formulation runs near it. Times forward and forward + backward of each variant on the step's
layout: q, k as HF's Qwen3 attention passes them, (1, H, T, d) views of (1, T, H, d) storage."""
import statistics
import sys

import torch

T, H, HK, D = int(sys.argv[1]) if len(sys.argv) > 1 else 45800, 32, 8, 128
dev, dt = ("cuda" if torch.cuda.is_available() else "cpu"), torch.bfloat16


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return (x * cos) + (torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)


def rotate_halves(x, cos, sin):
    x1, x2 = x.unflatten(-1, (2, -1)).unbind(-2)
    c1, c2 = cos.unflatten(-1, (2, -1)).unbind(-2)
    s1, s2 = sin.unflatten(-1, (2, -1)).unbind(-2)
    return torch.stack((x1 * c1 + (-x2) * s1, x2 * c2 + x1 * s2), dim=-2).flatten(-2)


def eager(q, k, cos, sin):
    return rotate(q, cos, sin), rotate(k, cos, sin)


def tokens_major(fn):
    # The same function on the storage order: (1, T, H, d) for q and k, (1, T, 1, d) for cos, sin.
    def run(q, k, cos, sin):
        c, s = cos.transpose(1, 2), sin.transpose(1, 2)
        return fn(q.transpose(1, 2), c, s).transpose(1, 2), fn(k.transpose(1, 2), c, s).transpose(1, 2)
    return run


def marked(q, k, cos, sin):
    # dualkv.training.fused as of this session: only the token dimension symbolic (cos, sin are
    # passed here already unsqueezed, so squeeze them back for its (B, T, d) signature).
    from dualkv.training.fused import _fused_apply_rotary_pos_emb
    return _fused_apply_rotary_pos_emb(q, k, cos.squeeze(1), sin.squeeze(1))


variants = {
    "compiled_dynamic (main)": torch.compile(eager, dynamic=True, fullgraph=True),
    "eager": eager,
    "token_dim_marked (session 30)": marked,
    "compiled_static": torch.compile(eager, dynamic=False, fullgraph=True),
    "tokens_major_dynamic": torch.compile(tokens_major(rotate), dynamic=True, fullgraph=True),
    "halves_dynamic": torch.compile(lambda q, k, c, s: (rotate_halves(q, c, s), rotate_halves(k, c, s)),
                                    dynamic=True, fullgraph=True),
    "halves_tokens_major_dynamic": torch.compile(tokens_major(rotate_halves), dynamic=True, fullgraph=True),
}


def inputs(t, grad):
    q = torch.randn(1, t, H, D, device=dev, dtype=dt).transpose(1, 2).requires_grad_(grad)
    k = torch.randn(1, t, HK, D, device=dev, dtype=dt).transpose(1, 2).requires_grad_(grad)
    pos = torch.arange(t, device=dev, dtype=torch.float32)
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))
    ang = torch.cat((pos[:, None] * inv, pos[:, None] * inv), -1)[None]
    return q, k, ang.cos().to(dt).unsqueeze(1), ang.sin().to(dt).unsqueeze(1)


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


bytes_fwd = 2 * 2 * T * (H + HK) * D + 2 * 2 * T * D
reference = None
for name, fn in variants.items():
    # A warm-up length first, as a step sees a new length each time (dynamic variants compile once).
    fn(*inputs(T - 77, False))
    torch.manual_seed(0)
    q, k, c, s = inputs(T, True)
    out = fn(q, k, c, s)
    if reference is None:
        reference = [o.detach().clone() for o in out]
    same = all(torch.equal(o, r) for o, r in zip(out, reference))
    err = max((o.float() - e).abs().max().item() for o, e in zip(out, eager(q.float(), k.float(), c.float(), s.float())))
    strides = [tuple(o.stride()) for o in out]
    with torch.no_grad():
        f = timed(lambda: fn(q, k, c, s))
    go = [torch.randn_like(o) for o in out]
    fb = timed(lambda: torch.autograd.backward(fn(q, k, c, s), go))
    print(f"{name:32s} fwd {f*1e3:8.1f} us ({bytes_fwd/f/1e9:5.2f} TB/s)  fwd+bwd {fb*1e3:8.1f} us  "
          f"max|err| vs fp32 {err:.3g}  bitwise equal to main's {same}  out strides {strides}", flush=True)


# RMSNorm and the SiLU gate: every dimension symbolic (before) against the rows marked (now).
from dualkv.training import fused  # noqa: E402


def rms(hidden, weight):
    x = hidden.to(torch.float32)
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).to(hidden.dtype)


def silu_gate(gate, up):
    return torch.nn.functional.silu(gate) * up


cases = {
    "rms_norm hidden (1, T, 4096)": (rms, lambda t: (torch.randn(1, t, 4096, device=dev, dtype=dt),
                                                     torch.randn(4096, device=dev, dtype=dt)), 2 * 2 * 4096),
    "rms_norm q heads (1, T, 32, 128)": (rms, lambda t: (torch.randn(1, t, 32, 128, device=dev, dtype=dt),
                                                         torch.randn(128, device=dev, dtype=dt)), 2 * 2 * 4096),
    "silu_gate (1, T, 12288)": (silu_gate, lambda t: (torch.randn(1, t, 12288, device=dev, dtype=dt),
                                                      torch.randn(1, t, 12288, device=dev, dtype=dt)), 3 * 2 * 12288),
}
for name, (fn, make, bytes_per_token) in cases.items():
    everything = torch.compile(fn, dynamic=True, fullgraph=True)
    rows = torch.compile(fn, fullgraph=True)

    def rows_marked(*args):
        return rows(fused._rows_dynamic(args[0]), *(fused._rows_dynamic(a) if a.dim() > 1 else a for a in args[1:]))

    for label, run in (("all dims symbolic", everything), ("rows marked", rows_marked)):
        run(*make(T - 77))
        args = make(T)
        with torch.no_grad():
            f = timed(lambda: run(*args))
        print(f"{name:34s} {label:18s} fwd {f*1e3:8.1f} us ({bytes_per_token*T/f/1e9:5.2f} TB/s)", flush=True)
