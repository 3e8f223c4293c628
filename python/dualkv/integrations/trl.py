"""`DualKVGRPOTrainer`: trl.GRPOTrainer with per-token log-probs and entropies computed on packed
batches (each prompt once, then its responses), everything else the trainer's own.

    from dualkv.integrations.trl import DualKVGRPOTrainer
    trainer = DualKVGRPOTrainer(model="Qwen/Qwen3-0.6B", reward_funcs=..., args=GRPOConfig(...),
                                train_dataset=...)   # the same arguments as GRPOTrainer
    trainer.train()

What it changes: `_get_per_token_logps_and_entropies`, the one place GRPOTrainer runs the model
to score completions (policy in the loss, old and reference log-probs). There the N-copy rows
[pad prompt | completion pad] are regrouped by identical prompt tokens (GRPOTrainer shuffles and
splits its batches, so row order says nothing), packed, and scored through
`model(dualkv_packed=...)`; the results come back in the trainer's (B, C) layout, zero on
padding, as GRPOTrainer's own fused head returns them. Losses, advantages, metrics, generation
(vLLM or model.generate with the model's ordinary attention) are untouched.

Rows without a completion token (empty completions; truncated ones under
mask_truncated_completions, whose completion mask is zeroed) score nothing: their values are 0,
as in GRPOTrainer. Not supported (a clear error at construction or call): models with a layer that
mixes tokens outside dualkv's layout (`dualkv.token_mixing`: recurrent or convolution layers,
attention that ignores the layout), multimodal inputs, the MoE load-balancing loss, DeepSpeed
ZeRO-3, LM heads with a bias or logit scaling.
"""

from __future__ import annotations

import torch
import trl
from transformers import PreTrainedModel

from ..microbatch import plan_microbatches
from ..packing import pack_rows, unpack_to_rows
from .attention import use_packed_attention
from .grouping import groups_from_prompts
from .scoring import install_packed_scoring

__all__ = ["DualKVGRPOTrainer"]


class DualKVGRPOTrainer(trl.GRPOTrainer):
    """Drop-in `trl.GRPOTrainer` whose scoring forward passes run on packed prompt groups."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.aux_loss_enabled:
            raise ValueError(
                "router_aux_loss_coef: the MoE load-balancing loss counts each prompt token once per completion in "
                "the N-copy batch; a packed batch has each prompt token once, so the loss would change. Set "
                "router_aux_loss_coef=0 (routing itself is per token and works)"
            )
        if self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage == 3:
            raise ValueError(
                "deepspeed zero_stage: ZeRO-3 gathers the LM head only inside its own forward, and dualkv's chunked "
                "log-prob head reads it outside; use ZeRO-2 or FSDP"
            )
        for model in (self.model, self.ref_model):
            if model is not None:
                model = _transformers_model(self.accelerator.unwrap_model(model))
                use_packed_attention(model)
                # Also checks the model's token mixing, before accelerate wraps it.
                install_packed_scoring(
                    model, temperature=self.temperature, fp32_lm_head=bool(self.args.cast_lm_head_to_fp32)
                )

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        """GRPOTrainer's contract: (B, C) fp32 log-probs of the last C = logits_to_keep tokens of
        every row, (B, C) entropies when compute_entropy, and no aux loss. batch_size bounds the
        rows of one forward pass: here packed forwards of at most batch_size * L tokens."""
        given = sorted(name for name, value in multimodal.items() if value is not None)
        if given:
            raise ValueError(
                f"{given[0]}: DualKVGRPOTrainer packs text-only batches; multimodal inputs are not supported"
            )
        if compute_aux_loss:
            raise ValueError("compute_aux_loss: the MoE load-balancing loss is not supported on packed batches")
        num_rows, width = input_ids.shape
        prompt_width = width - logits_to_keep
        scored = attention_mask[:, prompt_width:].bool().any(dim=1)
        if not bool(scored.any()) and torch.is_grad_enabled():
            # Nothing to score, yet backward must reach the parameters (all-zero gradients, not an
            # error): GRPOTrainer's own forward over the prompts gives exactly that.
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss
            )
        logps = torch.zeros((num_rows, logits_to_keep), dtype=torch.float32, device=input_ids.device)
        entropies = torch.zeros_like(logps) if compute_entropy else None
        rows = scored.nonzero().squeeze(1)
        if rows.numel() == 0:
            return logps, entropies, None
        prompt_mask = attention_mask[rows, :prompt_width]
        group_ids = groups_from_prompts(input_ids[rows, :prompt_width], prompt_mask)
        prompt_lengths = prompt_mask.sum(dim=1).cpu()
        response_lengths = attention_mask[rows, prompt_width:].sum(dim=1).cpu()
        max_tokens = None if batch_size is None else batch_size * width
        for chunk in _chunks(group_ids, prompt_lengths, response_lengths, max_tokens):
            chunk_rows = rows[chunk.to(rows.device)]
            packed, row_map = pack_rows(
                input_ids[chunk_rows],
                attention_mask[chunk_rows],
                group_ids[chunk],
                prompt_lengths=prompt_lengths[chunk],
            )
            with self.accelerator.autocast():
                chunk_logps, chunk_entropies = model(dualkv_packed=packed)
            logps = logps.index_put((chunk_rows,), unpack_to_rows(chunk_logps, row_map)[:, prompt_width:])
            if compute_entropy:
                entropies = entropies.index_put(
                    (chunk_rows,), unpack_to_rows(chunk_entropies, row_map)[:, prompt_width:]
                )
        return logps, entropies, None


def _chunks(group_ids: torch.Tensor, prompt_lengths: torch.Tensor, response_lengths: torch.Tensor, max_tokens):
    """Row indices (into the scored rows) of each packed forward pass. max_tokens None: one pass;
    otherwise whole groups per pass where they fit (dualkv.microbatch), each pass at most
    max_tokens packed tokens, a group larger than that split with its prompt repeated."""
    if max_tokens is None:
        return [torch.arange(group_ids.numel())]
    members: dict[int, list[int]] = {}
    for row, group in enumerate(group_ids.tolist()):
        members.setdefault(group, []).append(row)
    groups = list(members.values())
    plan = plan_microbatches(
        [int(prompt_lengths[rows[0]]) for rows in groups],
        [[int(response_lengths[row]) for row in rows] for rows in groups],
        max_tokens=max_tokens,
    )
    return [
        torch.tensor([groups[s.group][i] for s in micro_batch.slices for i in s.responses])
        for micro_batch in plan.ranks[0]
    ]


def _transformers_model(model) -> PreTrainedModel:
    """The transformers model inside a PEFT wrapper (where GRPOTrainer puts its fused head too)."""
    get_base_model = getattr(model, "get_base_model", None)
    model = get_base_model() if callable(get_base_model) and not isinstance(model, PreTrainedModel) else model
    if not isinstance(model, PreTrainedModel):
        raise TypeError(
            f"model: expected a transformers PreTrainedModel (or a PEFT model of one), got {type(model).__name__}"
        )
    return model
