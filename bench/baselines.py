#!/usr/bin/env python3
"""What a user can run instead of dualkv, timed in one process on one GPU (docs/benchmarks.md).

  python3 bench/baselines.py [--configs all|NxP|P:R1/R2/...,...] [--dtype fp16|bf16|both] [--json PATH]
                             [--max-repeats 10] [--min-repeats 3] [--budget-s 3]

A --configs item is NxP (N responses of R = 2048 tokens) or P:R1/R2/.../RN (ragged responses of
the given lengths, e.g. a training step's micro-batch), named as dualkv_bench names them. On ragged
items the baselines that need equal-length sequences (cudnn_ncopy, cudnn_composition: cuDNN's SDPA
takes (batch, heads, length, d)) are reported as "unsupported", with the reason.

Baselines (exact, built as a user would build them):
  fa2_ncopy      torch.ops.aten._flash_attention_forward/_backward (PyTorch's FlashAttention-2) on
                 the N-copy layout (N(P+R), H, d), cum_seq = [0, P+R, 2(P+R), ...], causal, GQA native.
  cudnn_ncopy    scaled_dot_product_attention under SDPBackend.CUDNN_ATTENTION on (N, H, P+R, d) with
                 K/V heads repeated to H (done before timing, as the model's repeat_kv would), causal.
  fa2_varlen_kv  one FA2 varlen call: the prompt, then per response queries = the response and keys =
                 [prompt; response] (bottom-right causal); the per-response K/V gather is timed in the
                 forward and the summation of the N prompt dK/dV copies in the backward.
  flex_packed    torch.compile(flex_attention) on the packed stream (1, H, P+NR, d), enable_gqa, with
                 mask_mod (q >= k) & ((k < P) | ((q - P) // R == (k - P) // R)) via create_block_mask
                 (built before timing); on ragged responses (q >= k) & ((k < P) | (seg[q] == seg[k]))
                 with seg the response index of every row. Its default (Triton) backend.
  flex_fa4       the same through FlexAttention's FlashAttention-4 backend (kernel_options=
                 {"BACKEND": "FLASH"}; needs flash_attn.cute, as fa4_composition). Where the default
                 block mask is refused (its KV blocks must be a multiple of FA4's key tile, 80 keys at
                 head_dim 256), the block sizes in FlexPackedFa4.BLOCK_SIZES are tried in turn on the
                 agreement case; the first that runs and agrees is timed, and every refusal is printed
                 and kept in the JSON.
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
import itertools
import json
import statistics
import sys
import traceback
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

HEADS, KV_HEADS, HEAD_DIM, RESPONSE = 32, 8, 128, 2048  # Qwen3-8B's attention; --heads, --kv-heads, --head-dim
DESIGN_CONFIGS = [(4096, (RESPONSE,) * 28), (16384, (RESPONSE,) * 28), (32768, (RESPONSE,) * 16),
                  (32768, (RESPONSE,) * 28), (65536, (RESPONSE,) * 16)]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
BACKWARD_FLOP_RATIO = 2.5


class Problem:
    """One packed group: a prompt of P tokens and N responses of the given lengths, random inputs."""

    def __init__(self, p, response_lengths, heads, kv_heads, head_dim, dtype, seed=0):
        self.p, self.lengths, self.n = p, tuple(response_lengths), len(response_lengths)
        self.ragged = len(set(self.lengths)) > 1
        self.heads, self.kv_heads, self.head_dim, self.dtype = heads, kv_heads, head_dim, dtype
        self.starts = [p + sum(self.lengths[:i]) for i in range(self.n)]  # first row of each response
        self.tokens = p + sum(self.lengths)
        self.scale = head_dim ** -0.5
        gen = torch.Generator(device="cuda").manual_seed(seed)

        def uniform(*shape):
            return (torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)

        self.q = uniform(self.tokens, heads, head_dim)
        self.k = uniform(self.tokens, kv_heads, head_dim)
        self.v = uniform(self.tokens, kv_heads, head_dim)
        self.dout = uniform(self.tokens, heads, head_dim)

    def dedup_pairs(self):
        p = self.p
        return p * (p + 1) // 2 + sum(r * p + r * (r + 1) // 2 for r in self.lengths)

    def ncopy_pairs(self):
        return sum((self.p + r) * (self.p + r + 1) // 2 for r in self.lengths)

    def ncopy_lengths(self):
        """Length of each N-copy sequence [prompt; response_i]."""
        return [self.p + r for r in self.lengths]

    def ncopy_rows(self):
        """Packed row of every N-copy row: copy i is [prompt; response_i]."""
        prompt = torch.arange(self.p, device="cuda")
        copies = [torch.cat([prompt, start + torch.arange(r, device="cuda")])
                  for start, r in zip(self.starts, self.lengths)]
        return torch.cat(copies)

    def ncopy_first_copy_mask(self):
        """True for N-copy rows whose output counts: all of copy 0, and responses of the others."""
        return torch.cat([torch.cat([torch.full((self.p,), i == 0, device="cuda"),
                                     torch.ones(r, dtype=torch.bool, device="cuda")])
                          for i, r in enumerate(self.lengths)])

    def segment_ids(self):
        """(tokens,) int32: -1 on prompt rows, i on the rows of response i."""
        return torch.cat([torch.full((self.p,), -1, dtype=torch.int32, device="cuda")] +
                         [torch.full((r,), i, dtype=torch.int32, device="cuda") for i, r in enumerate(self.lengths)])


def offsets(lengths):
    """Cumulative sequence offsets [0, l0, l0 + l1, ...] as the varlen kernels take them (int32, CUDA)."""
    return torch.tensor([0] + list(itertools.accumulate(lengths)), device="cuda", dtype=torch.int32)


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
        self.length = max(problem.ncopy_lengths())
        self.cu = offsets(problem.ncopy_lengths())

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


def equal_lengths_only(problem):
    """The reason a baseline that batches equal-length sequences cannot run `problem`, or None."""
    if problem.ragged:
        return "cuDNN's SDPA takes (batch, heads, length, d): the responses must have one length"
    return None


class CudnnNCopy:
    name = "cudnn_ncopy"
    unsupported = staticmethod(equal_lengths_only)

    def __init__(self, problem):
        self.problem = problem
        n, length, group = problem.n, problem.p + problem.lengths[0], problem.heads // problem.kv_heads
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
        self.kv_rows = torch.cat([prompt] + [torch.cat([prompt, start + torch.arange(r, device="cuda")])
                                             for start, r in zip(p.starts, p.lengths)])
        self.cu_q = offsets((p.p,) + p.lengths)
        self.cu_k = offsets([p.p] + p.ncopy_lengths())
        self.max_q, self.max_k = max(p.p, *p.lengths), max(p.ncopy_lengths())

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
    kernel_options = None
    block_size = None  # create_block_mask's default

    def __init__(self, problem):
        p = problem
        self.problem = p
        prompt, response, segment = p.p, p.lengths[0], p.segment_ids()

        def mask_mod(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & ((kv_idx < prompt) | ((q_idx - prompt) // response == (kv_idx - prompt) // response))

        def ragged_mask_mod(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & ((kv_idx < prompt) | (segment[q_idx] == segment[kv_idx]))

        if p.ragged:
            mask_mod = ragged_mask_mod

        block_size = {} if self.block_size is None else {"BLOCK_SIZE": self.block_size}
        self.block_mask = _compiled_block_mask(mask_mod, None, None, p.tokens, p.tokens, device="cuda", **block_size)

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
                              enable_gqa=True, kernel_options=self.kernel_options)

    def backward(self, out):
        return torch.autograd.grad(out, (self.q, self.k, self.v), self.dout)

    def packed(self, out, grads):
        def packed_rows(x):
            return x.squeeze(0).transpose(0, 1).float()

        return (packed_rows(out.detach()),) + tuple(packed_rows(g) for g in grads)


class FlexPackedFa4(FlexPacked):
    name = "flex_fa4"
    kernel_options = {"BACKEND": "FLASH"}
    # (query block, key block) of the block mask, tried in this order: the default first, then key
    # blocks that are multiples of FA4's 80-key tile at head_dim 256 (its refusal names that tile).
    BLOCK_SIZES = (None, (128, 160), (128, 80), (256, 160))
    refusals = []  # (block size, error) of the sizes that did not run, for the report

    @staticmethod
    def unavailable():
        return load_fa4()[1]

    @classmethod
    def choose_block_size(cls, run_case):
        """Runs `run_case()` (the agreement case) with each block size until one works; keeps it.
        Raises the last error, with every refusal listed, if none works."""
        cls.refusals = []
        for size in cls.BLOCK_SIZES:
            cls.block_size = size
            try:
                return run_case()
            except Exception as error:  # noqa: BLE001 - each refusal is reported; the next size is tried
                cls.refusals.append((size, f"{type(error).__name__}: {error}"))
                print(f"flex_fa4: block size {size or 'default'} refused: {cls.refusals[-1][1][:300]}", flush=True)
        raise RuntimeError("every block size was refused: " +
                           "; ".join(f"{size or 'default'}: {why[:200]}" for size, why in cls.refusals))


class Piece(NamedTuple):
    """One ordinary attention call of a composition: which packed rows it reads as queries and as
    keys/values, split into sequences of the given lengths (as many on both sides)."""
    queries: slice
    keys: slice
    query_lengths: tuple
    key_lengths: tuple
    causal: bool

    @property
    def segments(self):
        return len(self.query_lengths)


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
    """A composition of ordinary attention calls that a user can run instead, exact. Subclasses run a piece:
    attend(i) -> (O rows (rows, H, d), LSE (H, rows) fp32, what its backward needs) and
    attend_backward(i, O rows, dO rows, LSE, saved) -> (dq, dk, dv) in packed rows."""

    def __init__(self, problem):
        p, prompt, responses = problem, slice(0, problem.p), slice(problem.p, problem.tokens)
        self.problem = p
        self.pieces = (Piece(prompt, prompt, (p.p,), (p.p,), True),  # A1: the prompt, causal
                       # A2: every response row against the prompt
                       Piece(responses, prompt, (p.tokens - p.p,), (p.p,), False),
                       Piece(responses, responses, p.lengths, p.lengths, True))  # B: each response causal on itself

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
    unsupported = staticmethod(equal_lengths_only)

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
            return dict(cu_seqlens_q=offsets(piece.query_lengths), cu_seqlens_k=offsets(piece.key_lengths),
                        max_seqlen_q=max(piece.query_lengths), max_seqlen_k=max(piece.key_lengths))

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


BASELINES = [Fa2NCopy, CudnnNCopy, Fa2VarlenCopiedKv, FlexPacked, FlexPackedFa4, CudnnComposition,
             Fa4Composition]


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
    segment = p.segment_ids()
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


def unsupported(baseline_type, problem):
    """Why `baseline_type` cannot run `problem` (e.g. ragged responses), or None."""
    check = getattr(baseline_type, "unsupported", None)
    return check(problem) if check else None


# The small cases every baseline is checked on: equal responses, and ragged ones (for the baselines
# that take them).
AGREEMENT_CASES = {"equal": (200, (56, 56, 56)), "ragged": (200, (56, 17, 90))}


def check_agreement(dtype, baseline_types, head_dim):
    """Each baseline against the fp32 reference on the small cases it supports. Returns (all agree,
    relative max errors by case and baseline, {name: error message} of the baselines that raised
    instead)."""
    tolerance = 8 * torch.finfo(dtype).eps
    errors, failures, ok = {}, {}, True
    for case, (p, lengths) in AGREEMENT_CASES.items():
        problem = Problem(p, lengths, heads=8, kv_heads=2, head_dim=head_dim, dtype=dtype, seed=1)
        reference = masked_reference(problem)
        errors[case] = {}
        for baseline_type in baseline_types:
            if baseline_type.name in failures or unsupported(baseline_type, problem) is not None:
                continue
            def run_case():
                baseline = baseline_type(problem)
                state = baseline.forward()
                return baseline, baseline.packed(state, baseline.backward(state))

            try:
                chooser = getattr(baseline_type, "choose_block_size", None)
                baseline, result = chooser(run_case) if chooser and case == "equal" else run_case()
            except Exception as error:  # noqa: BLE001 - reported with its traceback; the others still run
                traceback.print_exc()
                failures[baseline_type.name] = f"{type(error).__name__}: {error}"
                print(f"FAILED: {baseline_type.name} ({case}): {failures[baseline_type.name]}", flush=True)
                continue
            errors[case][baseline.name] = {}
            for name, got, want in zip(("out", "dq", "dk", "dv"), result, reference):
                error = ((got - want).abs().max() / want.abs().max()).item()
                errors[case][baseline.name][name] = error
                if not error <= tolerance:
                    ok = False
                    print(f"DISAGREES: {baseline.name} ({case}) {name} relative max error {error:.3e} > "
                          f"{tolerance:.3e}")
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
    """[(P, response lengths)] of "all" or of NxP and P:R1/R2/... items (dualkv_bench's grammar)."""
    if text == "all":
        return DESIGN_CONFIGS

    def length(word, item):
        if not word.isdigit() or int(word) < 1:
            raise ValueError(f"--configs: lengths must be integers >= 1, got {word!r} in {item!r}")
        return int(word)

    configs = []
    for item in text.split(","):
        if ":" in item:
            prompt, responses = item.split(":", 1)
            configs.append((length(prompt, item), tuple(length(r, item) for r in responses.split("/"))))
        elif "x" in item:
            n, prompt = item.split("x", 1)
            configs.append((length(prompt, item), (RESPONSE,) * length(n, item)))
        else:
            raise ValueError(f"--configs: expected NxP or P:R1/R2/... items, got {item!r}")
    return configs


def config_name(p, lengths, head_dim, heads=HEADS, kv_heads=KV_HEADS):
    """dualkv_bench's name: N28_P4096, N32_P8192_R308-2038 (ragged), _H24k4 at other heads, _d64 at
    head_dim 64."""
    name = f"N{len(lengths)}_P{p}"
    if len(set(lengths)) > 1:
        name += f"_R{min(lengths)}-{max(lengths)}"
    if (heads, kv_heads) != (HEADS, KV_HEADS):
        name += f"_H{heads}k{kv_heads}"
    return name if head_dim == HEAD_DIM else f"{name}_d{head_dim}"


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
    parser.add_argument("--heads", type=int, default=HEADS, help="query heads (names end in _H<heads>k<kv-heads> "
                        "unless 32 and 8)")
    parser.add_argument("--kv-heads", type=int, default=KV_HEADS, help="key/value heads")
    args = parser.parse_args()
    if args.head_dim <= 0:
        parser.error("--head-dim must be > 0")
    if args.heads <= 0 or args.kv_heads <= 0 or args.heads % args.kv_heads:
        parser.error("--heads and --kv-heads must be > 0 with --heads a multiple of --kv-heads")
    try:
        configs = parse_configs(args.configs)
    except ValueError as error:
        parser.error(str(error))
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
        for case, case_errors in errors.items():
            print(f"agreement {dtype_name} {case}: " + ", ".join(
                f"{b} {max(e.values()):.2e}" for b, e in case_errors.items()), flush=True)
        if not ok:
            print("baselines disagree with the reference; not timing them", file=sys.stderr)
            sys.exit(1)

    for dtype_name in dtypes:
        for p, lengths in configs:
            problem = Problem(p, lengths, args.heads, args.kv_heads, args.head_dim, DTYPES[dtype_name])
            for baseline_type in selected:
                responses = list(lengths) if problem.ragged else lengths[0]
                entry = {"config": config_name(p, lengths, args.head_dim, args.heads, args.kv_heads),
                         "dtype": dtype_name, "baseline": baseline_type.name, "N": len(lengths), "P": p,
                         "R": responses, "H": args.heads, "Hk": args.kv_heads, "d": args.head_dim}
                if baseline_type.name in skipped[dtype_name]:
                    entry.update(skipped[dtype_name][baseline_type.name])
                    report["results"].append(entry)
                    continue
                if (reason := unsupported(baseline_type, problem)) is not None:
                    entry.update(status="unsupported", reason=reason)
                    report["results"].append(entry)
                    print(f"{entry['config']:>12} {dtype_name} {entry['baseline']:>17}: unsupported ({reason})",
                          flush=True)
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

    report["flex_fa4_block_size"] = FlexPackedFa4.block_size
    report["flex_fa4_refusals"] = [{"block_size": size, "error": why} for size, why in FlexPackedFa4.refusals]
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
