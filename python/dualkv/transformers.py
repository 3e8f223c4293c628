"""Hugging Face transformers integration: `attn_implementation="dualkv"`.

Importing this module registers the attention function "dualkv" with transformers'
AttentionInterface, so that

    import dualkv.transformers
    model = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv")
    out = model(input_ids=packed.input_ids, position_ids=packed.position_ids,
                dualkv_layout=packed.layout, use_cache=False)

runs a decoder on the packed batch. `dualkv_layout` travels to every attention layer through
transformers' **kwargs plumbing. Norms, projections, MLPs, MoE routing and RoPE are per token, so
only attention needs the layout; RoPE gets it through the restarted `position_ids`.

Every other layer that mixes tokens would run over the packed stream as one sequence, so each
model is checked before its first packed result (`check_token_mixing`, dualkv.token_mixing: a
behavioural test of every layer, run once per model instance at its first packed forward, and by
PackedPolicy and the trainer integrations before they wrap the model) and refused with an error
naming the layers that mix tokens outside the layout (recurrent and convolution layers, attention
that ignores the mask, ...). A sliding window runs when it covers the batch's longest path
(prompt plus longest response), where it cuts nothing; a shorter one is refused.

The layout is the mask, so none is built: "dualkv"'s entry in transformers' AttentionMaskInterface
returns None. That entry is also where a caller's 2-D attention_mask arrives (transformers drops it
before the attention function): one with a padding zero is refused, since the packed batch has no
padding to mask. The position ids RoPE used are checked against the layout's once per forward pass:
without them (or with the N-copy ones) every response would sit after all earlier responses.
Under torch.compile both value checks run on the device instead (torch._assert_async), in every
call: a wrong value stops the run there, never silently.

On first use per device, dtype and head shape, the attention operator checks itself against the
N-copy computation (`dualkv.check.check_attention`, a few milliseconds) and raises if it fails, so
a broken build or driver cannot train silently. DUALKV_SELF_CHECK=0 turns that off. The check runs
on a thread of its own, so that none of the caller's thread-local autograd state reaches it and it
leaves none behind: the first call is often inside an activation-checkpointed layer, whose
recomputation must save (and, with selective checkpointing, compute) exactly what its forward did.

Sequence parallelism: a `dualkv.distributed.SequenceParallelLayout` as `dualkv_layout` (see
`dualkv.distributed.shard_sequence`) means the inputs are this rank's rows of the stream and the
layout is global; attention then runs Ulysses over the layout's process group.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

from . import _gated_deltanet, _model_guard, attention, check, token_mixing
from ._layout import Layout
from .distributed import SequenceParallelLayout, ulysses_attention
from .token_mixing import (
    LayoutNotReceivedError,
    UnsupportedModelError,
    check_token_mixing,
    mark_token_mixing_checked,
)

__all__ = [
    "ATTENTION_NAME",
    "SELF_CHECK_VARIABLE",
    "UnsupportedModelError",
    "check_token_mixing",
    "dualkv_attention_forward",
    "mark_token_mixing_checked",
]

ATTENTION_NAME = token_mixing.ATTENTION_NAME
SELF_CHECK_VARIABLE = "DUALKV_SELF_CHECK"


def dualkv_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    softcap: float | None = None,
    dualkv_layout=None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: query (1, H, T, d), key/value (1, Hk, T, d) in the packed
    order -> (1, T, H, d). Grouped-query attention is native (H % Hk == 0); no K/V repetition."""
    if dualkv_layout is None:
        raise LayoutNotReceivedError(
            f"dualkv_layout: {type(module).__name__} was called without the packed layout, which "
            "attn_implementation='dualkv' needs; call model(input_ids=packed.input_ids, "
            "position_ids=packed.position_ids, dualkv_layout=packed.layout) (a model whose layers do not pass the "
            "call's keyword arguments on to their attention cannot run on dualkv)",
            module,
        )
    if isinstance(dualkv_layout, SequenceParallelLayout):
        # This rank's position ids are a shard of the stream's; shard_sequence made them, and
        # only the whole stream's are checked against the layout (see docs/decisions.md).
        if not isinstance(dualkv_layout.layout, Layout):
            raise TypeError(
                f"dualkv_layout.layout: expected a dualkv.Layout, got {type(dualkv_layout.layout).__name__}"
            )
        layout = dualkv_layout.layout
    elif isinstance(dualkv_layout, Layout):
        _check_layout_matches_input(query, dualkv_layout)
        _check_position_ids(kwargs.get("position_ids"), dualkv_layout)
        layout = dualkv_layout
    else:
        raise TypeError(
            f"dualkv_layout: expected a dualkv.Layout or SequenceParallelLayout, got {type(dualkv_layout).__name__}"
        )
    if attention_mask is not None:
        raise ValueError(
            "attention_mask: must be None with attn_implementation='dualkv' (the layout defines the mask); "
            f"got a tensor of shape {tuple(attention_mask.shape)}"
        )
    if not getattr(module, "is_causal", True):
        raise ValueError(f"{type(module).__name__}: dualkv attention is causal; this layer is not")
    if dropout:
        raise ValueError(
            f"dropout: attention dropout is not supported by dualkv; got p={dropout} (set attention_dropout=0)"
        )
    # A window covering every path cuts nothing: the layout's mask is the windowed mask. (The
    # model check's probe batch is not the caller's: the caller's batch decides.)
    if sliding_window is not None and sliding_window < layout.longest_path and not token_mixing.probing():
        raise ValueError(
            f"sliding_window: a window of {sliding_window} tokens is shorter than this batch's longest path "
            f"({layout.longest_path} tokens: a prompt and its longest response); dualkv attends over whole paths, so "
            "it runs sliding-window layers only when the window covers every path"
        )
    if softcap is not None:
        raise ValueError(f"softcap: logit soft-capping is not supported by dualkv; got {softcap}")
    if kwargs.get("s_aux") is not None:
        raise ValueError("s_aux: attention sinks are not supported by dualkv")
    if query.dim() != 4 or query.shape[0] != 1:
        raise ValueError(f"query: expected (1, H, T, d) for one packed sequence, got {tuple(query.shape)}")
    if key.shape[2] != query.shape[2]:
        raise ValueError(
            f"key: {key.shape[2]} keys for {query.shape[2]} queries; dualkv runs whole packed batches "
            "without a KV cache (pass use_cache=False)"
        )
    # (1, H, T, d) -> (T, H, d) views: the op takes any strides with a contiguous head dimension.
    # squeeze, not [0]: select's backward would write each gradient into a new zeroed tensor.
    probe_dtype = _probe_dtype(query)
    q, k, v = (x.squeeze(0).transpose(0, 1).to(probe_dtype) for x in (query, key, value))
    out = _attend(q, k, v, dualkv_layout, softmax_scale=scaling)
    # After the call, so that arguments the operator refuses are reported as such, not as a failed
    # check; in the dtype the kernels ran in (under autocast, the autocast dtype).
    _self_check_once(query.device, out.dtype, query.shape[1], key.shape[1], query.shape[3])
    if probe_dtype != query.dtype:
        out = out.to(query.dtype)
    return out.unsqueeze(0), None


def _probe_dtype(x: torch.Tensor) -> torch.dtype:
    """The model check probes a model as built, on CUDA often in fp32 master weights that FSDP2's
    mixed precision casts only when it computes; the CUDA kernels take fp16 and bf16. The probe
    reads only which gradients are zero: bf16 has fp32's exponent range and the kernels never read
    a key outside a query's ranges, so it answers as fp32 would. Outside the probe, fp32 on CUDA
    stays the operator's error."""
    if token_mixing.probing() and x.is_cuda and x.dtype == torch.float32:
        return torch.bfloat16
    return x.dtype


# --- Sequence parallelism ----------------------------------------------------------------------
def _attend(q, k, v, dualkv_layout, *, softmax_scale):
    """A SequenceParallelLayout means q, k, v are this rank's rows of a sequence-sharded stream:
    Ulysses attention over its group. Otherwise they are the whole packed stream."""
    if isinstance(dualkv_layout, SequenceParallelLayout):
        return ulysses_attention(q, k, v, dualkv_layout.layout, dualkv_layout.group, softmax_scale=softmax_scale)
    return attention(q, k, v, dualkv_layout, softmax_scale=softmax_scale)


# (device, dtype, heads, kv_heads, head_dim) whose self-check passed in this process.
_self_checked: set = set()


def _self_check_once(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int) -> None:
    key = (device, dtype, heads, kv_heads, head_dim)
    if key in _self_checked or os.environ.get(SELF_CHECK_VARIABLE, "1") == "0":
        return
    if torch.compiler.is_compiling() or device.type == "meta":  # no values to check
        return
    result = _run_self_check(device, dtype, heads, kv_heads, head_dim)
    if not result.passed:
        raise RuntimeError(
            "dualkv: the attention operator failed its self-check on this machine, so its results cannot be "
            f"trusted here:\n{result.report()}\nRun `python -m dualkv.check` to see the whole check, and report "
            f"it with that output. {SELF_CHECK_VARIABLE}=0 skips the check."
        )
    _self_checked.add(key)


def _run_self_check(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int):
    """check.check_attention, run on a new thread and waited for.

    The check runs its own forward and backward passes. In the caller's thread they would run
    under whatever the caller has switched on there, all of it thread-local: non-reentrant
    activation checkpointing's saved-tensor hooks (the check's saved tensors would be counted as
    the layer's, and the recomputation, which does not run the check again, would save fewer:
    CheckpointError), selective checkpointing's dispatch modes (the check's op outputs would be
    cached and handed to the recomputation's ops), torch.func transforms, torch function modes,
    no_grad, inference mode and autocast. A new thread starts with none of them. It runs no
    collectives, so under FSDP or DDP each rank checks on its own.

    Inside a backward pass (the first call from a function that autograd runs, e.g. a
    recomputation), the check runs in the caller's thread: that thread may be the autograd engine's
    worker for the device, which the check's own backward pass would need while this thread waits.
    """

    def run():
        with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
            return check.check_attention(device, dtype, heads=heads, kv_heads=kv_heads, head_dim=head_dim)

    if torch._C._current_graph_task_id() != -1:
        return run()
    outcome = {}

    def target():
        try:
            outcome["result"] = run()
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="dualkv-self-check", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


_POSITION_RULE = (
    "must be the packed layout's positions (prompt 0..P-1, every response restarting at P), "
    "and position_ids and dualkv_layout must come from one packed batch: "
    "model(..., position_ids=packed.position_ids, dualkv_layout=packed.layout)"
)
_MASK_RULE = (
    "must be None (or all ones) with attn_implementation='dualkv': the packed layout defines the mask and a "
    "packed batch has no padding"
)

# Per layout, the position_ids tensor (weakly) and its version last found equal to the layout's:
# every layer of one forward pass gets the same tensor, so only the first layer compares values.
_verified_position_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_layout_matches_input(query: torch.Tensor, layout: Layout) -> None:
    """A layout of another pack() call usually has another token count; said here, before the
    position ids (which do belong to the input) are compared with it and blamed."""
    tokens = query.shape[2] if query.dim() == 4 else None
    if tokens is not None and tokens != layout.num_tokens:
        raise ValueError(
            f"dualkv_layout: describes {layout.num_tokens} packed tokens but the model's input has {tokens}: the "
            "layout does not belong to these input ids (was it made by another pack() call?); pass input_ids, "
            "position_ids and dualkv_layout of one packed batch"
        )


def _check_position_ids(position_ids: torch.Tensor | None, layout: Layout) -> None:
    # The model check (always eager) sees which positions a model uses by default.
    if not torch.compiler.is_compiling() and token_mixing.positions_unchecked():
        return
    if position_ids is None:
        raise ValueError(
            "position_ids: this model does not pass position ids to its attention layers, so dualkv cannot check "
            "that its rotary embeddings used the layout's positions"
        )
    flat = position_ids[0] if position_ids.dim() == 2 and position_ids.shape[0] == 1 else position_ids
    if torch.compiler.is_compiling():
        # No host values inside a compiled graph: the comparison runs on the device, and a
        # mismatch fails the run there (an error on the CPU, a device-side assert on CUDA). The
        # layout's own position ids (computed when the batch was packed) are a plain attribute the
        # graph reads; its per-device cache would break the graph.
        expected = layout._position_ids.to(position_ids.device)
        if flat.shape != expected.shape:
            raise ValueError(
                f"position_ids: {_POSITION_RULE}; got shape {tuple(flat.shape)} for {expected.numel()} tokens"
            )
        torch._assert_async((flat == expected).all(), f"position_ids: {_POSITION_RULE}")
        return
    # Inference tensors have no version counter, so an in-place change could not be seen: they
    # are compared in every layer.
    version = None if position_ids.is_inference() else position_ids._version
    verified = _verified_position_ids.get(layout)
    if version is not None and verified is not None and verified[0]() is position_ids and verified[1] == version:
        return
    expected = layout._position_ids_on(position_ids.device)
    if flat.shape != expected.shape or not torch.equal(flat, expected):
        raise ValueError(f"position_ids: {_POSITION_RULE}; got {_first_difference(flat, expected)}")
    if version is not None:
        _verified_position_ids[layout] = (weakref.ref(position_ids), version)


def _first_difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)} for {expected.numel()} packed tokens"
    token = int((got != expected).nonzero()[0, 0])
    return f"position {int(got[token])} at packed token {token}, where the layout has {int(expected[token])}"


def _refuse_padding_mask(
    *args, attention_mask: torch.Tensor | None = None, batch_size: int | None = None, **kwargs
) -> None:
    """transformers' mask builder for "dualkv": attention_mask is the caller's 2-D padding mask
    (as bool) or None. A packed batch has no padding, so only an all-true mask means anything;
    the mask it returns is None, since the layout is the mask. It is also the first dualkv code a
    forward reaches, so it refuses a batch that is not one packed sequence before the rotary
    embedding or the attention layers fail on it with a message about something else."""
    if batch_size is not None and batch_size != 1:
        raise _model_guard.not_one_sequence(batch_size)
    if attention_mask is None:
        return
    if torch.compiler.is_compiling():  # checked on the device, as the position ids are
        torch._assert_async(attention_mask.all(), f"attention_mask: {_MASK_RULE}; got a mask with zeros")
    elif not bool(attention_mask.all()):
        raise ValueError(f"attention_mask: {_MASK_RULE}; got a mask with zeros")


AttentionInterface.register(ATTENTION_NAME, dualkv_attention_forward)
AttentionMaskInterface.register(ATTENTION_NAME, _refuse_padding_mask)
# Qwen3.5, Qwen3.5-MoE, Qwen3-Next: their Gated DeltaNet layers read the layout too.
_gated_deltanet.install()
_model_guard.install()
