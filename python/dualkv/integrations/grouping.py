"""Prompt groups of a trainer's N-copy rows, recovered from the rows' content, never their order.

Trainers shuffle, balance and split their batches, so the rows of one prompt are rarely
contiguous and a micro-batch often holds part of a group. Rows whose real prompt tokens are
identical get one group id (two dataset entries with the same prompt merge, which is exact:
identical prompts have identical hidden states); a caller's uid is checked against the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["groups_from_prompts", "groups_from_uids"]


def groups_from_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
    """(B,) group ids, numbered by first appearance: rows b, c share one iff their real prompt
    tokens (prompt_ids where prompt_mask is 1; any padding side) are identical."""
    return torch.tensor(_number(_prompts(prompt_ids, prompt_mask, "prompt_ids")), dtype=torch.long)


def groups_from_uids(uids: Sequence, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
    """(B,) group ids from per-row uids (any hashable values), numbered by first appearance;
    raises if one uid maps to rows with different prompts. Rows with different uids but the same
    prompt stay apart: the caller's grouping is kept, only checked."""
    prompts = _prompts(prompt_ids, prompt_mask, "prompt_ids")
    if len(uids) != len(prompts):
        raise ValueError(f"uids: expected one uid per row ({len(prompts)}), got {len(uids)}")
    first_row: dict = {}
    for b, (uid, prompt) in enumerate(zip(uids, prompts)):
        a = first_row.setdefault(uid, b)
        if prompts[a] != prompt:
            raise ValueError(
                f"uids: uid {uid!r} maps to rows with different prompts (row {a}: {len(prompts[a])} tokens, row {b}: "
                f"{len(prompt)} tokens); every row of one uid must hold the identical prompt"
            )
    return torch.tensor(_number(list(uids)), dtype=torch.long)


def _prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, name: str) -> list[tuple[int, ...]]:
    if prompt_ids.dim() != 2 or prompt_mask.shape != prompt_ids.shape:
        raise ValueError(
            f"{name}: expected (B, P) token ids with a prompt mask of the same shape, got "
            f"{tuple(prompt_ids.shape)} and {tuple(prompt_mask.shape)}"
        )
    ids, mask = prompt_ids.cpu().tolist(), prompt_mask.bool().cpu().tolist()
    return [tuple(t for t, m in zip(row, row_mask) if m) for row, row_mask in zip(ids, mask)]


def _number(keys: list) -> list[int]:
    numbers: dict = {}
    return [numbers.setdefault(key, len(numbers)) for key in keys]
