"""veRL's padding-free micro-batch <-> dualkv's packed batch.

veRL's engine holds a micro-batch as jagged rows: row b of `input_ids` (a nested tensor) is its
real prompt tokens followed by its real response tokens; `attention_mask[:, :prompts.shape[1]]`
counts the prompt's. Its losses read per-row log-probs in the same jagged form, where value t of
row b is log p(token t + 1 | tokens <= t), and take the response part with `no_padding_2_padding`
(values P_b - 1 .. P_b + R_b - 2). `pack_micro_batch` regroups the rows by uid (checked against
the prompt tokens) wherever they sit in the micro-batch; `to_jagged_rows` puts packed results
back in veRL's form, zeros outside the response part.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...packing import PackedBatch, RowMap, pack_rows, unpack_to_rows
from ..grouping import groups_from_prompts, groups_from_uids

__all__ = ["PackedMicroBatch", "pack_micro_batch", "to_jagged_rows"]


@dataclass(frozen=True)
class PackedMicroBatch:
    """packed / row_map: the rows that have response tokens, packed (None if no row has one).
    scored_rows: (S,) their indices in the micro-batch. offsets: (B + 1,) veRL's jagged offsets."""

    packed: PackedBatch | None
    row_map: RowMap | None
    scored_rows: torch.Tensor
    offsets: torch.Tensor

    @property
    def num_rows(self) -> int:
        return self.offsets.numel() - 1


def pack_micro_batch(micro_batch) -> PackedMicroBatch:
    """Packs a veRL micro-batch (a TensorDict with nested `input_ids`, `prompts`, `attention_mask`,
    and optionally a per-row `uid`). Without `uid`, groups come from identical prompt tokens."""
    input_ids = micro_batch["input_ids"]
    if not (isinstance(input_ids, torch.Tensor) and input_ids.is_nested):
        raise ValueError("input_ids: expected veRL's padding-free (nested, jagged) input_ids")
    offsets = input_ids.offsets()
    lengths = offsets.diff()
    prompt_lengths = _prompt_lengths(micro_batch)
    if bool((prompt_lengths < 1).any()) or bool((prompt_lengths > lengths).any()):
        raise ValueError("attention_mask: every row needs a prompt of >= 1 token within its real tokens")
    num_rows = lengths.numel()
    _check_loss_mask(micro_batch, prompt_lengths)
    rows = torch.nested.to_padded_tensor(input_ids, padding=0, output_size=(num_rows, int(lengths.max())))
    real = torch.arange(rows.shape[1], device=rows.device)[None, :] < lengths[:, None]
    scored_rows = (lengths > prompt_lengths).nonzero().squeeze(1)
    if scored_rows.numel() == 0:
        return PackedMicroBatch(None, None, scored_rows, offsets)
    rows, real, prompt_lengths = rows[scored_rows], real[scored_rows], prompt_lengths[scored_rows]
    prompt_mask = real & (torch.arange(rows.shape[1], device=rows.device)[None, :] < prompt_lengths[:, None])
    uids = _uids(micro_batch, num_rows)
    if uids is None:
        group_ids = groups_from_prompts(rows, prompt_mask)
    else:
        group_ids = groups_from_uids([uids[b] for b in scored_rows.tolist()], rows, prompt_mask)
    packed, row_map = pack_rows(rows, real.long(), group_ids, prompt_lengths=prompt_lengths)
    return PackedMicroBatch(packed, row_map, scored_rows, offsets)


def to_jagged_rows(values: torch.Tensor, batch: PackedMicroBatch) -> torch.Tensor:
    """(num_responses, max_R) response-layout values -> veRL's nested (B, j) per-row values:
    response token j of row b at position P_b - 1 + j (the row that predicts it), zeros
    elsewhere. Differentiable."""
    by_token = unpack_to_rows(values, batch.row_map)  # token j of row b at its own position P_b + j
    lengths = batch.offsets.diff().to(values.device)
    width = int(lengths.max())
    rows = values.new_zeros((batch.num_rows, width))
    rows = rows.index_put((batch.scored_rows.to(values.device),), by_token)  # pack_micro_batch kept the width
    predicted_by = torch.nn.functional.pad(rows[:, 1:], (0, 1))  # value t: the token at t + 1
    real = torch.arange(width, device=values.device)[None, :] < lengths[:, None]
    return torch.nested.nested_tensor_from_jagged(predicted_by[real], offsets=batch.offsets.to(values.device))


def _prompt_lengths(micro_batch) -> torch.Tensor:
    prompts = micro_batch["prompts"]
    if prompts.is_nested:
        return prompts.offsets().diff()
    return micro_batch["attention_mask"][:, : prompts.shape[1]].sum(dim=1)


def _check_loss_mask(micro_batch, prompt_lengths: torch.Tensor) -> None:
    """RL batches carry a response-only loss mask (padded, or jagged over the responses). A jagged
    one over whole rows (veRL's SFT layout) that marks prompt tokens would read log-probs this
    path leaves at 0: refuse it."""
    loss_mask = micro_batch.get("loss_mask", None)
    if loss_mask is None or not loss_mask.is_nested:
        return
    lengths = loss_mask.offsets().diff()
    if not torch.equal(lengths, micro_batch["input_ids"].offsets().diff().to(lengths.device)):
        return  # jagged over the responses only (veRL's TransferQueue trainer): nothing on prompts
    mask = torch.nested.to_padded_tensor(loss_mask, padding=0, output_size=(lengths.numel(), int(lengths.max())))
    columns = torch.arange(mask.shape[1], device=mask.device)[None, :]
    prompt_tokens = (columns >= 1) & (columns < prompt_lengths.to(mask.device)[:, None])  # token 0 is never scored
    if bool((mask.bool() & prompt_tokens).any()):
        raise ValueError(
            "loss_mask: marks prompt tokens; the dualkv engine scores response tokens only (log-probs elsewhere are 0)"
        )


def _uids(micro_batch, num_rows: int) -> list | None:
    if "uid" not in micro_batch:
        return None
    uids = list(micro_batch["uid"])  # a NonTensorStack, one value per row
    if len(uids) != num_rows:
        raise ValueError(f"uid: expected one uid per row ({num_rows}), got {len(uids)}")
    return uids
