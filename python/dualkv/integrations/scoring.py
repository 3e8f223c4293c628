"""A packed scoring entry on a causal LM's own forward: `model(dualkv_packed=packed)`.

Returns the per-response log-probs and entropies (dualkv's response layout) of a PackedBatch (or,
under sequence parallelism, of the batch a SequenceShard belongs to, on every rank of its group),
computed from the backbone's hidden states with dualkv's chunked LM head, so no (T, vocab)
logits exist. It is an entry of `model.forward` rather than a separate function because the
wrappers trainers put around a model (DDP, FSDP, accelerate) act in its forward: gradient
synchronisation and parameter gathering then happen exactly as for an ordinary forward. Any call
without `dualkv_packed` goes to the previous forward unchanged (generation, N-copy scoring).
"""

from __future__ import annotations

import contextlib
import functools
import types

import torch
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel

from ..distributed import SequenceShard, sharded_response_logprobs_from_hidden
from ..logprobs import response_logprobs_from_hidden
from ..packing import PackedBatch
from ..token_mixing import check_token_mixing
from .attention import PREFIX, packed_forward

__all__ = ["install_packed_scoring"]

# Config attributes that change the logits after the LM head's matmul (transformers' names);
# dualkv's chunked head computes hidden @ W^T / temperature and nothing else.
_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def install_packed_scoring(model: PreTrainedModel, *, temperature: float = 1.0, fp32_lm_head: bool = False) -> None:
    """Adds the `dualkv_packed=` entry to `model.forward` (idempotent). `model`'s attention must
    already dispatch packed calls to dualkv (`use_packed_attention`). fp32_lm_head: project in
    fp32 with autocast off (TRL's cast_lm_head_to_fp32). A call may pass dualkv_temperature to
    override `temperature` (veRL carries it in every micro-batch).

    Call it before a trainer wraps the model (FSDP, DDP): it checks here that every layer of the
    model that mixes tokens keeps to the layout (`dualkv.token_mixing`), which a sharded model
    cannot be probed for. A model on the meta device is not checked here: check it (or mark it
    checked) once its weights are loaded, before its first packed call."""
    if getattr(model, "_dualkv_packed_scoring", None) is not None:
        return
    _check_lm_head(model)
    if not str(model.config._attn_implementation).startswith(PREFIX):
        raise ValueError(
            "model: its attention does not dispatch packed calls to dualkv; call "
            "dualkv.integrations.attention.use_packed_attention(model) first"
        )
    previous_forward = model.forward

    # The class's signature stays visible: generate() validates its keyword arguments against it.
    @functools.wraps(type(model).forward)
    def forward(self, *args, dualkv_packed=None, dualkv_temperature: float | None = None, use_cache=None, **kwargs):
        if dualkv_packed is None:
            if dualkv_temperature is not None:
                raise ValueError("dualkv_temperature: only meaningful with dualkv_packed")
            if use_cache is not None:
                kwargs["use_cache"] = use_cache
            return previous_forward(*args, **kwargs)
        # None-valued keywords are what wrappers (PEFT) fill in for arguments nobody passed.
        given = sorted(name for name, value in kwargs.items() if value is not None) + (
            ["use_cache"] if use_cache else []
        )
        if args or given:
            raise ValueError(
                f"dualkv_packed: a packed scoring call takes no other arguments (use_cache only False), got "
                f"{len(args)} positional and {given}"
            )
        chosen = temperature if dualkv_temperature is None else float(dualkv_temperature)
        return _score(self, dualkv_packed, chosen, fp32_lm_head)

    model.forward = types.MethodType(forward, model)
    model._dualkv_packed_scoring = (temperature, fp32_lm_head)
    if not any(parameter.is_meta for parameter in model.parameters()):
        check_token_mixing(model)


def _score(model: PreTrainedModel, batch: PackedBatch | SequenceShard, temperature: float, fp32_lm_head: bool):
    """The backbone on the packed stream (or this rank's shard of it, attention running Ulysses),
    then the chunked LM head on the rows that score response tokens."""
    if isinstance(batch, SequenceShard):
        inputs = batch.model_inputs()
    elif isinstance(batch, PackedBatch):
        inputs = {
            "input_ids": batch.input_ids,
            "position_ids": batch.position_ids,
            "dualkv_layout": batch.layout,
            "use_cache": False,
        }
    else:
        raise TypeError(f"dualkv_packed: expected a dualkv.PackedBatch or SequenceShard, got {type(batch).__name__}")
    with packed_forward():
        hidden = model.base_model(**inputs).last_hidden_state
    weight = model.get_output_embeddings().weight
    if isinstance(weight, DTensor):  # FSDP2 shards the head; the chunked head needs all of it
        weight = weight.full_tensor()
    hidden = hidden.to(weight.device)
    autocast = contextlib.nullcontext()
    if fp32_lm_head:
        hidden, weight = hidden.float(), weight.float()
        autocast = torch.autocast(hidden.device.type, enabled=False)
    with autocast:
        if isinstance(batch, SequenceShard):
            return sharded_response_logprobs_from_hidden(
                hidden, weight, batch, temperature=temperature, return_entropy=True
            )
        return response_logprobs_from_hidden(hidden, weight, batch, temperature=temperature, return_entropy=True)


def _check_lm_head(model: PreTrainedModel) -> None:
    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise TypeError(f"model: expected a torch.nn.Linear LM head, got {type(head).__name__}")
    if head.bias is not None:
        raise ValueError("model: its LM head has a bias, which dualkv's chunked log-prob head does not add")
    config = model.config.get_text_config()
    for name in _LOGIT_TRANSFORMS:
        value = getattr(config, name, None)
        if value is not None and not (name != "final_logit_softcapping" and value == 1):
            raise ValueError(
                f"model.config.{name}: {value!r} transforms the logits, which dualkv's chunked log-prob head does not do"
            )
