#!/usr/bin/env python3
"""The baselines of design section 4, timed in one process on one GPU.

  python3 bench/baselines.py [--configs all|NxP,...] [--dtype fp16|bf16|both] [--json PATH]
                             [--max-repeats 10] [--min-repeats 3] [--budget-s 3]

Baselines (design section 4, built exactly as described there):
  fa2_ncopy      torch.ops.aten._flash_attention_forward/_backward (PyTorch's FlashAttention-2) on
                 the N-copy layout (N(P+R), H, d), cum_seq = [0, P+R, 2(P+R), ...], causal, GQA native.
  cudnn_ncopy    scaled_dot_product_attention under SDPBackend.CUDNN_ATTENTION on (N, H, P+R, d) with
                 K/V heads repeated to H (done before timing, as the model's repeat_kv would), causal.
  fa2_varlen_kv  one FA2 varlen call: the prompt, then per response queries = the response and keys =
                 [prompt; response] (bottom-right causal); the per-response K/V gather is timed in the
                 forward and the summation of the N prompt dK/dV copies in the backward.
  flex_packed    torch.compile(flex_attention) on the packed stream (1, H, P+NR, d), enable_gqa, with
                 mask_mod (q >= k) & ((k < P) | ((q - P) // R == (k - P) // R)) via create_block_mask
                 (built before timing).
  cudnn_composition  three ordinary attention calls on slices of the packed stream, no K/V copies,
                 through torch.ops.aten._scaled_dot_product_cudnn_attention(compute_log_sumexp=True)
                 and its _backward op, GQA native (K/V keep their Hk heads): A1 the prompt, causal;
                 A2 all N*R response rows against the prompt keys, non-causal; B each response causal
                 on itself (N sequences of R). A2 and B are merged per row by their LSEs; each piece's
                 backward gets the merged O and LSE with the same dO; response dQ = A2's + B's, prompt
                 dK/dV = A1's + A2's. The merge and the sums (one fused torch.compile kernel each) are
                 timed in the forward and the backward.
  fa4_composition  the same composition through FlashAttention-4's varlen forward and backward
                 (flash_attn.cute, PyPI flash-attn-4; bench/install_fa4_wheels.sh installs it offline).
                 Where it cannot be imported it is reported as "not installed", with the reason.
First, on a small case, every baseline's packed O, dQ, dK and dV are checked against an fp32
masked-attention reference (and so against each other); the script stops if one disagrees. A
baseline that raises there is reported as failed, with the error, and not timed.
Timing: torch.cuda.Event around each forward and each backward; the first forward+backward is the
warm-up (compilation included) and the peak-memory run (torch.cuda.max_memory_allocated, counting
the packed inputs and the baseline's own copied layout); then min..max repeats, as many as the
first timed pass says fit --budget-s, and the median of each; then as many forwards back to back,
whose median is forward_alone_ms (the forward at the clock its own power draw sets; in the
alternating passes it inherits the clock the preceding backward left, as dualkv_bench's does).
A configuration that does not fit in memory is reported as OOM.
"""
import argparse
import gc
import json
import statistics
import sys
import traceback
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

HEADS, KV_HEADS, HEAD_DIM, RESPONSE = 32, 8, 128, 2048
DESIGN_CONFIGS = [(28, 4096), (28, 16384), (16, 32768), (28, 32768), (16, 65536)]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
BACKWARD_FLOP_RATIO = 2.5


class Problem:
    """One packed group: a prompt of P tokens and N responses of R tokens, random inputs."""

    def __init__(self, n, p, r, heads, kv_heads, head_dim, dtype, seed=0):
        self.n, self.p, self.r = n, p, r
        self.heads, self.kv_heads, self.head_dim, self.dtype = heads, kv_heads, head_dim, dtype
        self.tokens = p + n * r
        self.scale = head_dim ** -0.5
        gen = torch.Generator(device="cuda").manual_seed(seed)

        def uniform(*shape):
            return (torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)

        self.q = uniform(self.tokens, heads, head_dim)
        self.k = uniform(self.tokens, kv_heads, head_dim)
        self.v = uniform(self.tokens, kv_heads, head_dim)
        self.dout = uniform(self.tokens, heads, head_dim)

    def dedup_pairs(self):
        p, r, n = self.p, self.r, self.n
        return p * (p + 1) // 2 + n * (r * p + r * (r + 1) // 2)

    def ncopy_pairs(self):
        length = self.p + self.r
        return self.n * length * (length + 1) // 2

    def ncopy_rows(self):
        """Packed row of every N-copy row: copy i is [prompt; response_i]."""
        prompt = torch.arange(self.p, device="cuda")
        copies = [torch.cat([prompt, self.p + i * self.r + torch.arange(self.r, device="cuda")]) for i in range(self.n)]
        return torch.cat(copies)

    def ncopy_first_copy_mask(self):
        """True for N-copy rows whose output counts: all of copy 0, and responses of the others."""
        length = self.p + self.r
        position = torch.arange(self.n * length, device="cuda")
        return (position < length) | (position % length >= self.p)


def packed_from_ncopy(problem, rows, keep, out, dq, dk, dv):
    """Map N-copy results back: counted rows of O/dQ overwrite, copied K/V rows' gradients add up."""
    out_p = torch.zeros_like(problem.q, dtype=torch.float32).index_copy_(0, rows[keep], out[keep].float())
    dq_p = torch.zeros_like(problem.q, dtype=torch.float32).index_copy_(0, rows[keep], dq[keep].float())
    dk_p = torch.zeros_like(problem.k, dtype=torch.float32).index_add_(0, rows, dk.float())
    dv_p = torch.zeros_like(problem.v, dtype=torch.float32).index_add_(0, rows, dv.float())
    return out_p, dq_p, dk_p, dv_p


class Fa2NCopy:
    name = "fa2_ncopy"

    def __init__(self, problem):
        self.problem = problem
        self.rows = problem.ncopy_rows()
        self.keep = problem.ncopy_first_copy_mask()
        self.q, self.k, self.v = problem.q[self.rows], problem.k[self.rows], problem.v[self.rows]
        self.dout = problem.dout[self.rows] * self.keep[:, None, None]
        self.length = problem.p + problem.r
        self.cu = torch.arange(0, problem.n + 1, device="cuda", dtype=torch.int32) * self.length

    def pairs(self):
        return self.problem.ncopy_pairs()

    def forward(self):
        out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            self.q, self.k, self.v, self.cu, self.cu, self.length, self.length, 0.0, True, False,
            scale=self.problem.scale)
        return out, lse, rng, unused

    def backward(self, state):
        out, lse, rng, unused = state
        return torch.ops.aten._flash_attention_backward(
            self.dout, self.q, self.k, self.v, out, lse, self.cu, self.cu, self.length, self.length, 0.0, True,
            rng, unused, scale=self.problem.scale)

    def packed(self, state, grads):
        return packed_from_ncopy(self.problem, self.rows, self.keep, state[0], *grads)


class CudnnNCopy:
    name = "cudnn_ncopy"

    def __init__(self, problem):
        self.problem = problem
        n, length, group = problem.n, problem.p + problem.r, problem.heads // problem.kv_heads
        self.rows = problem.ncopy_rows()
        self.keep = problem.ncopy_first_copy_mask()

        def batched(x, repeat=1):
            x = x[self.rows].view(n, length, -1, problem.head_dim)
            return x.repeat_interleave(repeat, dim=2).transpose(1, 2).contiguous()

        self.q = batched(problem.q).requires_grad_()
        self.k = batched(problem.k, group).requires_grad_()
        self.v = batched(problem.v, group).requires_grad_()
        self.dout = batched(problem.dout) * self.keep.view(n, 1, length, 1)

    def pairs(self):
        return self.problem.ncopy_pairs()

    def forward(self):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True, scale=self.problem.scale)

    def backward(self, out):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.autograd.grad(out, (self.q, self.k, self.v), self.dout)

    def packed(self, out, grads):
        p = self.problem
        group = p.heads // p.kv_heads

        def rows_of(x):
            return x.transpose(1, 2).reshape(-1, x.shape[1], p.head_dim)

        def kv_rows(x):  # the repeated heads of one kv head sum into it
            n, _, length, d = x.shape
            return rows_of(x.view(n, p.kv_heads, group, length, d).sum(dim=2))

        dq, dk, dv = grads
        return packed_from_ncopy(p, self.rows, self.keep, rows_of(out.detach()), rows_of(dq), kv_rows(dk), kv_rows(dv))


class Fa2VarlenCopiedKv:
    name = "fa2_varlen_kv"

    def __init__(self, problem):
        p = problem
        self.problem = p
        self.q, self.k, self.v, self.dout = p.q, p.k, p.v, p.dout
        prompt = torch.arange(p.p, device="cuda")
        self.kv_rows = torch.cat([prompt] + [torch.cat([prompt, p.p + i * p.r + torch.arange(p.r, device="cuda")])
                                             for i in range(p.n)])
        self.cu_q = torch.tensor([0] + [p.p + i * p.r for i in range(p.n + 1)], device="cuda", dtype=torch.int32)
        self.cu_k = torch.tensor([0] + [p.p + i * (p.p + p.r) for i in range(p.n + 1)], device="cuda",
                                 dtype=torch.int32)
        self.max_q, self.max_k = max(p.p, p.r), p.p + p.r

    def pairs(self):
        return self.problem.dedup_pairs()

    def forward(self):
        k, v = self.k.index_select(0, self.kv_rows), self.v.index_select(0, self.kv_rows)
        out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            self.q, k, v, self.cu_q, self.cu_k, self.max_q, self.max_k, 0.0, True, False, scale=self.problem.scale)
        return out, lse, rng, unused, k, v

    def backward(self, state):
        out, lse, rng, unused, k, v = state
        dq, dk_copies, dv_copies = torch.ops.aten._flash_attention_backward(
            self.dout, self.q, k, v, out, lse, self.cu_q, self.cu_k, self.max_q, self.max_k, 0.0, True, rng, unused,
            scale=self.problem.scale)
        dk = torch.zeros_like(self.k).index_add_(0, self.kv_rows, dk_copies)
        dv = torch.zeros_like(self.v).index_add_(0, self.kv_rows, dv_copies)
        return dq, dk, dv

    def packed(self, state, grads):
        return (state[0].float(),) + tuple(g.float() for g in grads)


_compiled_flex = torch.compile(flex_attention)
# Compiled, the block mask is built block by block instead of from a dense T x T boolean mask.
_compiled_block_mask = torch.compile(create_block_mask)


class FlexPacked:
    name = "flex_packed"

    def __init__(self, problem):
        p = problem
        self.problem = p
        prompt, response = p.p, p.r

        def mask_mod(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & ((kv_idx < prompt) | ((q_idx - prompt) // response == (kv_idx - prompt) // response))

        self.block_mask = _compiled_block_mask(mask_mod, None, None, p.tokens, p.tokens, device="cuda")

        def heads_first(x):
            return x.transpose(0, 1).unsqueeze(0).contiguous()

        self.q = heads_first(p.q).requires_grad_()
        self.k = heads_first(p.k).requires_grad_()
        self.v = heads_first(p.v).requires_grad_()
        self.dout = heads_first(p.dout)

    def pairs(self):
        return self.problem.dedup_pairs()

    def forward(self):
        return _compiled_flex(self.q, self.k, self.v, block_mask=self.block_mask, scale=self.problem.scale,
                              enable_gqa=True)

    def backward(self, out):
        return torch.autograd.grad(out, (self.q, self.k, self.v), self.dout)

    def packed(self, out, grads):
        def packed_rows(x):
            return x.squeeze(0).transpose(0, 1).float()

        return (packed_rows(out.detach()),) + tuple(packed_rows(g) for g in grads)


class Piece(NamedTuple):
    """One ordinary attention call of a composition: which packed rows it reads as queries and as
    keys/values, split into `segments` equal-length sequences on both sides."""
    queries: slice
    keys: slice
    segments: int
    causal: bool

    def length(self, rows):
        return (rows.stop - rows.start) // self.segments


def _merge_states(o_prompt, o_cross, lse_cross, o_own, lse_own):
    """Packed O and the response rows' merged LSE (H, N*R): A1's rows as they are, then A2's and B's
    states merged per row (weights exp(lse_piece - lse), fp32, one rounding)."""
    lse = torch.logaddexp(lse_cross, lse_own)

    def weight(lse_piece):  # (H, rows) -> (rows, H, 1), matching O's (rows, H, d)
        return torch.exp(lse_piece - lse).t().unsqueeze(-1)

    o_responses = weight(lse_cross) * o_cross.float() + weight(lse_own) * o_own.float()
    return torch.cat([o_prompt, o_responses.to(o_prompt.dtype)]), lse


def _sum_gradients(prompt, cross, own):
    """Packed dQ, dK, dV from the three pieces' (dq, dk, dv): response dQ = A2's + B's, prompt
    dK/dV = A1's + A2's (added in fp32, one rounding)."""
    (dq_prompt, dk_prompt, dv_prompt), (dq_cross, dk_cross, dv_cross), (dq_own, dk_own, dv_own) = prompt, cross, own

    def add(a, b):
        return (a.float() + b.float()).to(a.dtype)

    return (torch.cat([dq_prompt, add(dq_cross, dq_own)]), torch.cat([add(dk_prompt, dk_cross), dk_own]),
            torch.cat([add(dv_prompt, dv_cross), dv_own]))


# Compiled, the merge and the sums are one fused pass each, as a user composing kernels would write
# them; eager, every step would be its own pass over fp32 temporaries the size of the responses' O.
_compiled_merge = torch.compile(_merge_states, dynamic=False)
_compiled_sum = torch.compile(_sum_gradients, dynamic=False)


class Composition:
    """Design section 4's composition of ordinary attention calls, exact. Subclasses run one piece:
    attend(i) -> (O rows (rows, H, d), LSE (H, rows) fp32, what its backward needs) and
    attend_backward(i, O rows, dO rows, LSE, saved) -> (dq, dk, dv) in packed rows."""

    def __init__(self, problem):
        p, prompt, responses = problem, slice(0, problem.p), slice(problem.p, problem.tokens)
        self.problem = p
        self.pieces = (Piece(prompt, prompt, 1, True),  # A1: the prompt, causal
                       Piece(responses, prompt, 1, False),  # A2: every response row against the prompt
                       Piece(responses, responses, p.n, True))  # B: each response causal on itself

    def pairs(self):
        return self.problem.dedup_pairs()

    def forward(self):
        (o_prompt, lse_prompt, saved_prompt), (o_cross, lse_cross, saved_cross), (o_own, lse_own, saved_own) = [
            self.attend(i) for i in range(3)]
        out, lse = _compiled_merge(o_prompt, o_cross, lse_cross, o_own, lse_own)
        # A2's and B's backward get the merged LSE: with the merged O it gives each its exact share of dS.
        return out, (lse_prompt, lse, lse), (saved_prompt, saved_cross, saved_own)

    def backward(self, state):
        out, lses, saved = state
        dout = self.problem.dout
        grads = [self.attend_backward(i, out[piece.queries], dout[piece.queries], lses[i], saved[i])
                 for i, piece in enumerate(self.pieces)]
        return _compiled_sum(*grads)

    def packed(self, state, grads):
        return (state[0].float(),) + tuple(g.float() for g in grads)


def heads_first(rows, segments):
    """(rows, heads, d) -> (segments, heads, rows / segments, d), the layout cuDNN's SDPA takes; a view."""
    return rows.view(segments, -1, *rows.shape[1:]).transpose(1, 2)


def rows_first(x):
    """(segments, heads, length, d) -> (segments * length, heads, d); a view for the layouts cuDNN writes."""
    return x.transpose(1, 2).reshape(-1, x.shape[1], x.shape[3])


class CudnnComposition(Composition):
    name = "cudnn_composition"

    def inputs(self, i):
        piece, p = self.pieces[i], self.problem
        return (heads_first(p.q[piece.queries], piece.segments), heads_first(p.k[piece.keys], piece.segments),
                heads_first(p.v[piece.keys], piece.segments))

    def attend(self, i):
        piece, heads = self.pieces[i], self.problem.heads
        out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = torch.ops.aten._scaled_dot_product_cudnn_attention(
            *self.inputs(i), None, True, 0.0, piece.causal, False, scale=self.problem.scale)
        lse_rows = lse.reshape(piece.segments, heads, -1).transpose(0, 1).reshape(heads, -1)
        return rows_first(out), lse_rows, (lse.shape, cum_q, cum_k, max_q, max_k, seed, offset)

    def attend_backward(self, i, out, dout, lse, saved):
        piece, heads = self.pieces[i], self.problem.heads
        lse_shape, cum_q, cum_k, max_q, max_k, seed, offset = saved
        # cuDNN reads the stats with the strides it is handed: give them the layout its forward wrote.
        lse = lse.view(heads, piece.segments, -1).transpose(0, 1).contiguous().view(lse_shape)
        grads = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            heads_first(dout, piece.segments), *self.inputs(i), heads_first(out, piece.segments), lse, seed, offset,
            None, cum_q, cum_k, max_q, max_k, 0.0, piece.causal, scale=self.problem.scale)
        return tuple(rows_first(g) for g in grads)


_fa4 = None


def load_fa4():
    """FlashAttention-4's varlen forward and backward: (functions, None), or (None, why not)."""
    global _fa4
    if _fa4 is None:
        try:
            # The functions FA4's own autograd wraps: the public flash_attn_varlen_func cannot run a
            # backward on an O and LSE it did not compute itself (the merged ones).
            from flash_attn.cute.interface import _flash_attn_bwd, _flash_attn_fwd
            _fa4 = (_flash_attn_fwd, _flash_attn_bwd), None
        except Exception as error:  # noqa: BLE001 - ImportError, or the CuTe DSL failing to load
            status = "not installed" if isinstance(error, ImportError) else "unavailable"
            _fa4 = None, (status, f"flash_attn.cute: {type(error).__name__}: {error}")
    return _fa4


class Fa4Composition(Composition):
    name = "fa4_composition"

    def __init__(self, problem):
        super().__init__(problem)
        (self.fa4_forward, self.fa4_backward), _ = load_fa4()

        def varlen(piece):  # FA4's packed (rows, heads, d) layout takes the pieces as plain slices
            def offsets(rows):
                segment_starts = torch.arange(piece.segments + 1, device=problem.q.device, dtype=torch.int32)
                return segment_starts * piece.length(rows)

            return dict(cu_seqlens_q=offsets(piece.queries), cu_seqlens_k=offsets(piece.keys),
                        max_seqlen_q=piece.length(piece.queries), max_seqlen_k=piece.length(piece.keys))

        self.varlen = [varlen(piece) for piece in self.pieces]

    @staticmethod
    def unavailable():  # see unavailable() below
        return load_fa4()[1]

    def inputs(self, i):
        piece, p = self.pieces[i], self.problem
        return p.q[piece.queries], p.k[piece.keys], p.v[piece.keys]

    def attend(self, i):
        out, lse, *_ = self.fa4_forward(*self.inputs(i), softmax_scale=self.problem.scale,
                                        causal=self.pieces[i].causal, return_lse=True, **self.varlen[i])
        return out, lse, None

    def attend_backward(self, i, out, dout, lse, saved):
        return self.fa4_backward(*self.inputs(i), out, dout, lse, self.problem.scale, self.pieces[i].causal,
                                 **self.varlen[i])


BASELINES = [Fa2NCopy, CudnnNCopy, Fa2VarlenCopiedKv, FlexPacked, CudnnComposition, Fa4Composition]


def unavailable(baseline_type):
    """(status, reason) when a baseline cannot run in this process (a package it needs is
    missing), else None."""
    check = getattr(baseline_type, "unavailable", None)
    return check() if check else None


def masked_reference(problem):
    """fp32 dense-mask attention on the packed stream, gradients by autograd."""
    p = problem
    t = torch.arange(p.tokens, device="cuda")
    q_idx, k_idx = t[:, None], t[None, :]
    segment = torch.where(t < p.p, -1, (t - p.p) // p.r)
    visible = (q_idx >= k_idx) & ((k_idx < p.p) | (segment[:, None] == segment[None, :]))
    group = p.heads // p.kv_heads
    q = p.q.float().requires_grad_()
    k = p.k.float().requires_grad_()
    v = p.v.float().requires_grad_()
    scores = torch.einsum("qhd,khd->hqk", q, k.repeat_interleave(group, dim=1)) * p.scale
    probs = scores.masked_fill(~visible, float("-inf")).softmax(dim=-1)
    out = torch.einsum("hqk,khd->qhd", probs, v.repeat_interleave(group, dim=1))
    grads = torch.autograd.grad(out, (q, k, v), p.dout.float())
    return (out.detach(),) + grads


def check_agreement(dtype, baseline_types, head_dim):
    """Each baseline against the fp32 reference on a small case. Returns (all agree, relative max
    errors by baseline, {name: error message} of the baselines that raised instead)."""
    problem = Problem(n=3, p=200, r=56, heads=8, kv_heads=2, head_dim=head_dim, dtype=dtype, seed=1)
    reference = masked_reference(problem)
    tolerance = 8 * torch.finfo(dtype).eps
    errors, failures, ok = {}, {}, True
    for baseline_type in baseline_types:
        try:
            baseline = baseline_type(problem)
            state = baseline.forward()
            result = baseline.packed(state, baseline.backward(state))
        except Exception as error:  # noqa: BLE001 - reported with its traceback; the others still run
            traceback.print_exc()
            failures[baseline_type.name] = f"{type(error).__name__}: {error}"
            print(f"FAILED: {baseline_type.name}: {failures[baseline_type.name]}", flush=True)
            continue
        errors[baseline.name] = {}
        for name, got, want in zip(("out", "dq", "dk", "dv"), result, reference):
            error = ((got - want).abs().max() / want.abs().max()).item()
            errors[baseline.name][name] = error
            if not error <= tolerance:
                ok = False
                print(f"DISAGREES: {baseline.name} {name} relative max error {error:.3e} > {tolerance:.3e}")
    return ok, errors, failures


def is_out_of_memory(error):
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


def measure(baseline_type, problem, args):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    baseline = baseline_type(problem)
    start, middle, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))

    def timed_pass():
        start.record()
        state = baseline.forward()
        middle.record()
        baseline.backward(state)
        end.record()
        end.synchronize()
        return start.elapsed_time(middle), middle.elapsed_time(end)

    timed_pass()  # warm-up: compilation, cuDNN plans, allocator growth
    peak = torch.cuda.max_memory_allocated()
    # The first timed pass also sizes the run: as many repeats as fit the time budget.
    times = [timed_pass()]
    repeats = int(min(args.max_repeats, max(args.min_repeats, args.budget_s * 1e3 // sum(times[0]))))
    times += [timed_pass() for _ in range(repeats - 1)]
    forward_ms = statistics.median(t[0] for t in times)
    backward_ms = statistics.median(t[1] for t in times)

    def forward_alone():
        start.record()
        baseline.forward()
        middle.record()
        middle.synchronize()
        return start.elapsed_time(middle)

    forward_alone_ms = statistics.median(forward_alone() for _ in range(repeats))
    flops = 4 * problem.head_dim * problem.heads * baseline.pairs()
    return {"status": "ok", "repeats": repeats, "forward_ms": forward_ms, "backward_ms": backward_ms,
            "fb_ms": forward_ms + backward_ms, "forward_tflops": flops / forward_ms / 1e9,
            "backward_tflops": BACKWARD_FLOP_RATIO * flops / backward_ms / 1e9,
            "forward_alone_ms": forward_alone_ms, "forward_alone_tflops": flops / forward_alone_ms / 1e9,
            "peak_bytes": peak}


def parse_configs(text):
    if text == "all":
        return DESIGN_CONFIGS
    return [tuple(int(x) for x in item.split("x")) for item in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="all")
    parser.add_argument("--dtype", default="both", choices=["fp16", "bf16", "both"])
    parser.add_argument("--baselines", default=",".join(b.name for b in BASELINES))
    parser.add_argument("--json", default="")
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--max-repeats", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=3.0, help="timed seconds per (config, baseline, dtype)")
    parser.add_argument("--head-dim", type=int, default=HEAD_DIM,
                        help="head dimension of every configuration (names end in _d<head_dim> unless 128, "
                             "as dualkv_bench's do)")
    args = parser.parse_args()
    if args.head_dim <= 0:
        parser.error("--head-dim must be > 0")
    suffix = "" if args.head_dim == HEAD_DIM else f"_d{args.head_dim}"
    # One compiled flex kernel per shape and dtype; keep them all static rather than fall back.
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.automatic_dynamic_shapes = False

    dtypes = list(DTYPES) if args.dtype == "both" else [args.dtype]
    selected = [b for b in BASELINES if b.name in args.baselines.split(",")]
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "agreement": {}, "skipped": {},
              "results": []}
    # Per dtype, {name: {"status", "reason"}} of the selected baselines that are not timed.
    skipped = {dtype_name: {} for dtype_name in dtypes}
    for baseline_type in selected:
        if (missing := unavailable(baseline_type)) is not None:
            print(f"{baseline_type.name} skipped: {missing[1]}", flush=True)
            for dtype_name in dtypes:
                skipped[dtype_name][baseline_type.name] = {"status": missing[0], "reason": missing[1]}
    for dtype_name in dtypes:
        ok, errors, failures = check_agreement(
            DTYPES[dtype_name], [b for b in selected if b.name not in skipped[dtype_name]], args.head_dim)
        skipped[dtype_name].update({name: {"status": "failed", "reason": why} for name, why in failures.items()})
        report["agreement"][dtype_name] = errors
        report["skipped"][dtype_name] = skipped[dtype_name]
        print(f"agreement {dtype_name}: " + ", ".join(
            f"{b} {max(e.values()):.2e}" for b, e in errors.items()), flush=True)
        if not ok:
            print("baselines disagree with the reference; not timing them", file=sys.stderr)
            sys.exit(1)

    for dtype_name in dtypes:
        for n, p in parse_configs(args.configs):
            problem = Problem(n, p, RESPONSE, HEADS, KV_HEADS, args.head_dim, DTYPES[dtype_name])
            for baseline_type in selected:
                entry = {"config": f"N{n}_P{p}{suffix}", "dtype": dtype_name, "baseline": baseline_type.name,
                         "N": n, "P": p, "R": RESPONSE, "H": HEADS, "Hk": KV_HEADS, "d": args.head_dim}
                if baseline_type.name in skipped[dtype_name]:
                    entry.update(skipped[dtype_name][baseline_type.name])
                    report["results"].append(entry)
                    continue
                try:
                    entry.update(measure(baseline_type, problem, args))
                except Exception as error:  # noqa: BLE001 - OOM is expected at the largest shapes
                    if not is_out_of_memory(error):
                        raise
                    entry["status"] = "OOM"
                gc.collect()
                torch.cuda.empty_cache()
                report["results"].append(entry)
                if entry["status"] == "ok":
                    print(f"{entry['config']:>12} {dtype_name} {entry['baseline']:>17}: fwd {entry['forward_ms']:9.2f} ms"
                          f"  bwd {entry['backward_ms']:9.2f} ms  fwd alone {entry['forward_alone_ms']:9.2f} ms"
                          f"  peak {entry['peak_bytes'] / 2**30:6.1f} GiB"
                          f"  ({entry['repeats']} runs)", flush=True)
                else:
                    print(f"{entry['config']:>12} {dtype_name} {entry['baseline']:>17}: OOM", flush=True)
            del problem
            gc.collect()
            torch.cuda.empty_cache()

    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
