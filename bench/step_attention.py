"""The step benchmark's baseline attentions as transformers attention functions, driven by the
same `dualkv_layout` keyword PackedPolicy passes to every layer, so the methods share the model,
the log-prob code and the loss and differ only in attention and in the stream they run on:

  flash_ncopy  the N-copy stream, one [prompt; response] row per response back to back without
               padding (a layout whose every group has one response, or a forest of roots: every
               trajectory of a tree workload alone), through PyTorch's FlashAttention varlen
               kernel (torch.nn.attention.varlen.varlen_attn, causal per row, grouped-query
               attention native): how veRL runs padding-free batches.
  fa4_ncopy    the same N-copy stream through FlashAttention-4's varlen kernel
               (flash_attn.cute.flash_attn_varlen_func, PyPI flash-attn-4; bench/install_fa4_wheels.sh
               installs it offline), which runs head_dim 256 forward and backward on Hopper.
  flex_packed  the packed stream with FlexAttention (torch.compile(flex_attention), enable_gqa)
               and a block mask built from the layout's visibility rule (a tree's too); compiled
               for the stream length it runs, or for a symbolic length (set_flex_shapes). Its
               default (Triton) backend.
  flex_fa4     the same through FlexAttention's FlashAttention-4 backend
               (kernel_options={"BACKEND": "FLASH"}: torch 2.11 with the flash-attn-4 wheels).

Under sequence parallelism (`dualkv_layout` a dualkv.distributed.SequenceParallelLayout, the
inputs this rank's rows of the stream) each runs its kernel inside dualkv.distributed's Ulysses
attention: sequence shard -> head shard, the kernel on the whole stream, and back.

Hybrid models' Gated DeltaNet layers read the same layout (dualkv.recurrent): on the N-copy
stream every row is one sequence of one varlen call per layer, as veRL runs them, and on the
packed stream each response starts from its prompt's state.

All need a GPU. Importing this module registers the names and, for each, a mask builder that
returns None: the layout is the mask, so transformers must not build a (T, T) one.
"""

from __future__ import annotations

import functools
import weakref

import torch
from layer_benchmark import build_flex_block_mask
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

import dualkv
from dualkv.distributed import SequenceParallelLayout, ulysses_attention

# No "flash" in the name: transformers takes such names for its own flash-attention kernels.
FLASH_NCOPY = "step_bench_varlen_ncopy"
FA4_NCOPY = "step_bench_fa4_ncopy"
FLEX_PACKED = "step_bench_flex_packed"
FLEX_FA4 = "step_bench_flex_fa4"

# Per global layout (weakly: a micro-batch's layout dies with it), what every layer of its forward
# and backward reuses: the row offsets and longest row, or the block mask. Keyed by the Layout, not
# by a SequenceParallelLayout: a shard makes a new one for every forward.
_flash_rows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_flex_masks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_compiled_flex_attention = None
# torch.compile's `dynamic` for FlexAttention (set_flex_shapes): None compiles for the first stream
# length and recompiles with a symbolic length at a second one; True is symbolic from the start.
_flex_dynamic: bool | None = None


def set_flex_shapes(shapes: str) -> None:
    """How FlexAttention is compiled, before its first call: "auto" (torch.compile's default: for the
    stream length it first sees, a symbolic length once it sees a second) or "dynamic" (a symbolic
    length from the start, what a trainer whose stream length changes every step runs)."""
    global _flex_dynamic, _compiled_flex_attention
    if shapes not in ("auto", "dynamic"):
        raise ValueError(f"shapes: 'auto' or 'dynamic', got {shapes!r}")
    _flex_dynamic = True if shapes == "dynamic" else None
    _compiled_flex_attention = None


def _ncopy_rows(layout: dualkv.Layout) -> torch.Tensor | None:
    """The rows of an N-copy stream: every group's one [prompt; response] row, or every root of a
    forest of roots; None for any other layout."""
    if layout.depth == 1:
        return layout.cu_seqlens
    if layout.is_two_level and all(len(r) == 1 for r in layout.response_lengths):
        return layout.cu_seqlens[layout.cu_groups.long()]  # each row starts at its prompt
    return None


def flash_ncopy_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, dualkv_layout=None, **kwargs
):
    _check_ncopy(dualkv_layout, "flash_ncopy")
    return _attend_stream(_varlen_ncopy, query, key, value, dualkv_layout, scaling)


def fa4_ncopy_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, dualkv_layout=None, **kwargs
):
    _check_ncopy(dualkv_layout, "fa4_ncopy")
    return _attend_stream(_fa4_ncopy, query, key, value, dualkv_layout, scaling)


def _check_ncopy(dualkv_layout, method: str) -> None:
    layout = _global_layout(dualkv_layout)
    if layout is None or _ncopy_rows(layout) is None:
        raise ValueError(
            f"dualkv_layout: the {method} method needs the N-copy layout (one response per group, each group "
            "one [prompt; response] row, or a forest of roots), or a SequenceParallelLayout of it"
        )


def fa4_unavailable() -> str | None:
    """Why FlashAttention-4's varlen kernel cannot be imported here, or None."""
    try:
        from flash_attn.cute import flash_attn_varlen_func  # noqa: F401
    except Exception as error:  # noqa: BLE001 - ImportError, or the CuTe DSL failing to load
        return f"flash_attn.cute (flash-attn-4) cannot be imported: {type(error).__name__}: {error}"
    return None


def _flex_attention_function(method, kernel):
    """The transformers attention function of a FlexAttention method running `kernel`."""

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, dualkv_layout=None, **kwargs):
        if _global_layout(dualkv_layout) is None:
            raise ValueError(
                f"dualkv_layout: the {method} method needs the packed layout, or a SequenceParallelLayout of it"
            )
        return _attend_stream(kernel, query, key, value, dualkv_layout, scaling)

    return attention


def _global_layout(dualkv_layout) -> dualkv.Layout | None:
    """The layout of the whole stream: `dualkv_layout` itself, or a SequenceParallelLayout's."""
    if isinstance(dualkv_layout, SequenceParallelLayout):
        dualkv_layout = dualkv_layout.layout
    return dualkv_layout if isinstance(dualkv_layout, dualkv.Layout) else None


def _attend_stream(kernel, query, key, value, dualkv_layout, scaling):
    """transformers' (1, heads, T, d) inputs -> ((1, T, H, d), None) through `kernel` (q, k, v, layout,
    scale) on (T, heads, d) views. Under a SequenceParallelLayout the inputs are this rank's T_local
    rows, and the kernel runs between Ulysses' exchanges on the whole stream for this rank's heads,
    as the DualKV paper's FlashAttention + Ulysses baseline does."""
    # squeeze, not [0]: select's backward would write each gradient into a new zeroed tensor.
    q, k, v = (x.squeeze(0).transpose(0, 1) for x in (query, key, value))
    if isinstance(dualkv_layout, SequenceParallelLayout):
        out = ulysses_attention(
            q, k, v, dualkv_layout.layout, dualkv_layout.group, softmax_scale=scaling, attention_fn=kernel
        )
    else:
        out = kernel(q, k, v, dualkv_layout, scaling)
    return out.unsqueeze(0), None


def _varlen_ncopy(q, k, v, layout, scale):
    """(T, H, d) and (T, Hk, d) N-copy stream -> (T, H, d): causal attention within each row."""
    from torch.nn.attention.varlen import varlen_attn

    rows, longest = _ncopy_row_offsets(layout, q.device)
    return varlen_attn(
        q.contiguous(), k.contiguous(), v.contiguous(), rows, rows, longest, longest,
        scale=scale, window_size=(-1, 0),  # (-1, 0): causal within each row
    )


def _ncopy_row_offsets(layout, device):
    """Row offsets (int32 on `device`) and the longest row of an N-copy layout, once per layout."""
    if layout not in _flash_rows:
        starts = _ncopy_rows(layout)
        _flash_rows[layout] = (starts.to(device, torch.int32), int(starts.diff().max()))
    return _flash_rows[layout]


def _fa4_ncopy(q, k, v, layout, scale):
    """As _varlen_ncopy, through FlashAttention-4's varlen kernel (causal within each row, GQA native)."""
    from flash_attn.cute import flash_attn_varlen_func

    rows, longest = _ncopy_row_offsets(layout, q.device)
    out, _ = flash_attn_varlen_func(
        q, k, v, cu_seqlens_q=rows, cu_seqlens_k=rows, max_seqlen_q=longest, max_seqlen_k=longest,
        softmax_scale=scale, causal=True,
    )
    return out


def _flex(q, k, v, layout, scale, kernel_options=None):
    """(T, H, d) and (T, Hk, d) packed stream -> (T, H, d) through FlexAttention and the layout's block
    mask, with FlexAttention's kernel_options (None: its default backend). enable_gqa needs Hk to
    divide H: under Ulysses, kv replication gives each rank Hk' kv heads dividing its H/W query heads
    (dualkv.distributed.kv_replication)."""
    global _compiled_flex_attention
    if _compiled_flex_attention is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex_attention = torch.compile(flex_attention, dynamic=_flex_dynamic)
    if layout not in _flex_masks:
        _flex_masks[layout] = build_flex_block_mask(layout.to(q.device))
    heads_major = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))  # (1, heads, T, d) views
    options = {} if kernel_options is None else {"kernel_options": kernel_options}
    out = _compiled_flex_attention(*heads_major, block_mask=_flex_masks[layout], scale=scale, enable_gqa=True,
                                   **options)
    return out.squeeze(0).transpose(0, 1)


flex_packed_attention = _flex_attention_function("flex_packed", _flex)
flex_fa4_attention = _flex_attention_function("flex_fa4", functools.partial(_flex, kernel_options={"BACKEND": "FLASH"}))


def _no_mask(*args, **kwargs) -> None:
    return None


for _name, _function in (
    (FLASH_NCOPY, flash_ncopy_attention),
    (FA4_NCOPY, fa4_ncopy_attention),
    (FLEX_PACKED, flex_packed_attention),
    (FLEX_FA4, flex_fa4_attention),
):
    AttentionInterface.register(_name, _function)
    AttentionMaskInterface.register(_name, _no_mask)
