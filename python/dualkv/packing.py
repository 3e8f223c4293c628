"""Packing GRPO/DAPO rollouts into the shared-prompt layout, and the maps back.

A group's prompt is stored once, followed by its responses:
    [ prompt_0 | resp_0,0 | ... | resp_0,N0-1 | prompt_1 | resp_1,0 | ... ]
Two entry points build a PackedBatch:
- `pack(prompts, responses)` from token lists (a rollout engine's output);
- `pack_rows(input_ids, attention_mask, group_ids, ...)` from the N-copy (B, L) tensors a trainer
  holds, returning a RowMap as well, so per-row tensors (old/ref log-probs, masks, advantages)
  can be moved into the packed response layout and results moved back.
The "response layout" is (num_responses, max_R): response i (packing order, group-major) in row
i, its token j in column j, zeros past its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from ._layout import Layout

__all__ = [
    "PackedBatch",
    "RowMap",
    "pack",
    "pack_rows",
    "rows_to_responses",
    "unpack_to_rows",
    "unpack_tokens_to_rows",
]


@dataclass(frozen=True)
class PackedBatch:
    """One packed micro-batch: model inputs plus the response-token maps log-probs need.

    The "responses" are the scored sequences: a group's responses (`pack`, `pack_rows`), or the
    trajectories of a tree layout (`dualkv.pack_trajectories`: row i lists trajectory i's trained
    tokens, token j of its trained tokens in column j).
    input_ids, position_ids: (1, T) long; position ids restart at P_g for every response (trees:
        they continue along each path).
    layout: the dualkv.Layout the attention op takes.
    response_group: (num_responses,) long, group index of each response.
    response_lengths: (num_responses,) long.
    response_mask: (num_responses, max_R) bool, true on tokens j < R_i.
    token_rows: (num_responses, max_R) long, packed row holding response token j (0 past the end).
    score_rows: (num_responses, max_R) long, packed row whose logits predict token j: the group's
        last prompt row for j = 0, the response's own row j - 1 otherwise (trees: the row of the
        token before it on its path); 0 past the end.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    layout: Layout
    response_group: torch.Tensor
    response_lengths: torch.Tensor
    response_mask: torch.Tensor
    token_rows: torch.Tensor
    score_rows: torch.Tensor

    @property
    def num_tokens(self) -> int:
        return self.input_ids.shape[1]

    @property
    def num_responses(self) -> int:
        return self.response_lengths.shape[0]

    @property
    def max_response_length(self) -> int:
        return self.response_mask.shape[1]

    def to(self, device: torch.device | str) -> PackedBatch:
        """A copy whose tensors live on `device` (the layout stays as it is: the op takes it on CPU)."""
        moved = {
            f.name: getattr(self, f.name).to(device)
            if isinstance(getattr(self, f.name), torch.Tensor)
            else getattr(self, f.name)
            for f in fields(self)
        }
        return PackedBatch(**moved)


@dataclass(frozen=True)
class RowMap:
    """How the N-copy (B, L) rows of `pack_rows` map onto a PackedBatch; -1 marks "no source".

    token_index: (B, L) long, packed row of each row position (prompt positions of every row of a
        group point at the same shared prompt rows), -1 on padding.
    response_index: (B, L) long, flat index into the (num_responses, max_R) response layout of
        each response-token position, -1 on prompt and padding positions.
    source_index: (num_responses, max_R) long, flat index into (B, L) of each response token,
        -1 past the response's end.
    num_tokens: T, the packed length.
    """

    token_index: torch.Tensor
    response_index: torch.Tensor
    source_index: torch.Tensor
    num_tokens: int

    @property
    def row_shape(self) -> tuple[int, int]:
        return tuple(self.token_index.shape)


# Both entry points build ordinary tensors even under torch.inference_mode (rollouts often run
# there): a packed batch serves the training step too, where autograd saves its token ids.
@torch.inference_mode(False)
def pack(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[Sequence[int]]]) -> PackedBatch:
    """Packs G prompts and their responses: prompts[g] is a token-id sequence (list or 1-D tensor),
    responses[g] a non-empty list of token-id sequences sampled from prompts[g]."""
    _check_sequence(prompts, "prompts", "token-id sequences")
    _check_sequence(responses, "responses", "lists of token-id sequences")
    if len(prompts) != len(responses):
        raise ValueError(f"responses: expected one list of responses per prompt ({len(prompts)}), got {len(responses)}")
    if len(prompts) == 0:
        raise ValueError("prompts: at least one group is required")
    prompt_tokens = [_token_tensor(p, f"prompts[{g}]") for g, p in enumerate(prompts)]
    response_tokens = []
    for g, group in enumerate(responses):
        if isinstance(group, torch.Tensor) or not isinstance(group, Sequence) or len(group) == 0:
            raise ValueError(
                f"responses[{g}]: expected a non-empty list of token-id sequences, got {type(group).__name__}"
            )
        response_tokens.append([_token_tensor(r, f"responses[{g}][{i}]") for i, r in enumerate(group)])
    segments = [t for prompt, group in zip(prompt_tokens, response_tokens) for t in (prompt, *group)]
    input_ids = torch.cat(segments)[None, :]
    return _packed_batch(
        input_ids,
        [p.numel() for p in prompt_tokens],
        [[r.numel() for r in group] for group in response_tokens],
    )


@torch.inference_mode(False)
def pack_rows(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    group_ids: torch.Tensor | Sequence[int],
    *,
    response_mask: torch.Tensor | None = None,
    prompt_lengths: torch.Tensor | Sequence[int] | None = None,
) -> tuple[PackedBatch, RowMap]:
    """Packs a trainer's N-copy batch: row b = [pad] prompt response [pad].

    input_ids, attention_mask: (B, L); each row's real tokens (mask 1) must be one contiguous run,
    so left, right and two-sided padding all work. group_ids: (B,) ints, rows with the same id are
    responses to the same prompt (groups are packed in order of first appearance, rows within a
    group in row order). Exactly one of
      response_mask: (B, L), true on response tokens; the response runs from the first true entry
        to the row's last real token (entries inside may be false, e.g. tool output: move the mask
        with `rows_to_responses` to use it as the loss mask);
      prompt_lengths: (B,) number of real prompt tokens per row.
    Every row of a group must hold the identical prompt. Returns the PackedBatch and a RowMap,
    both on input_ids' device.
    """
    device = input_ids.device
    input_ids = _check_rows_tensor(input_ids, "input_ids")
    _check_id_dtype(input_ids, "input_ids")
    attention_mask = _check_rows_tensor(attention_mask, "attention_mask", like=input_ids)
    num_rows, row_length = input_ids.shape
    group_ids = _check_per_row(group_ids, "group_ids", num_rows)
    real = attention_mask.bool()
    _check_token_ids(input_ids[real], "input_ids")  # padding may hold anything
    starts, ends = _real_token_spans(real)
    if (response_mask is None) == (prompt_lengths is None):
        raise ValueError("response_mask, prompt_lengths: pass exactly one of them")
    if response_mask is not None:
        prompt_ends = _prompt_ends_from_response_mask(
            _check_rows_tensor(response_mask, "response_mask", like=input_ids).bool(), real, starts
        )
    else:
        prompt_ends = starts + _check_per_row(prompt_lengths, "prompt_lengths", num_rows)
    rows_by_group = _rows_by_group(group_ids.tolist())
    starts_list, ends_list, prompt_ends_list = starts.tolist(), ends.tolist(), prompt_ends.tolist()
    prompt_source = "response_mask" if response_mask is not None else "prompt_lengths"
    _check_row_spans(starts_list, ends_list, prompt_ends_list, prompt_source)
    _check_identical_prompts(input_ids, group_ids.tolist(), starts_list, prompt_ends_list, rows_by_group)

    token_index = torch.full((num_rows, row_length), -1, dtype=torch.long)
    segments, prompt_lengths_out, response_lengths_out, response_rows = [], [], [], []
    packed_position = 0
    for rows in rows_by_group:
        first = rows[0]
        prompt_length = prompt_ends_list[first] - starts_list[first]
        segments.append(input_ids[first, starts_list[first] : prompt_ends_list[first]])
        for b in rows:  # every row's prompt positions map onto the one stored prompt
            token_index[b, starts_list[b] : starts_list[b] + prompt_length] = (
                torch.arange(prompt_length) + packed_position
            )
        packed_position += prompt_length
        for b in rows:
            begin, end = prompt_ends_list[b], ends_list[b]
            segments.append(input_ids[b, begin:end])
            token_index[b, begin:end] = torch.arange(end - begin) + packed_position
            packed_position += end - begin
        prompt_lengths_out.append(prompt_length)
        response_lengths_out.append([ends_list[b] - prompt_ends_list[b] for b in rows])
        response_rows += rows
    packed = _packed_batch(torch.cat(segments)[None, :], prompt_lengths_out, response_lengths_out)
    row_map = _row_map(packed, token_index, torch.tensor(response_rows), prompt_ends, device)
    return packed.to(device), row_map


def _row_map(
    packed: PackedBatch, token_index: torch.Tensor, response_rows: torch.Tensor, prompt_ends: torch.Tensor, device
) -> RowMap:
    """The index maps between (B, L) rows and the response layout; response i came from row
    response_rows[i], where it starts at column prompt_ends[row]."""
    num_rows, row_length = token_index.shape
    columns = prompt_ends[response_rows][:, None] + torch.arange(packed.max_response_length)[None, :]
    source_index = torch.where(packed.response_mask, response_rows[:, None] * row_length + columns, -1)
    response_index = torch.full((num_rows * row_length,), -1, dtype=torch.long)
    valid = packed.response_mask.reshape(-1)
    response_index[source_index.reshape(-1)[valid]] = valid.nonzero().squeeze(1)
    return RowMap(
        token_index.to(device),
        response_index.view(num_rows, row_length).to(device),
        source_index.to(device),
        packed.num_tokens,
    )


def rows_to_responses(row_values: torch.Tensor, row_map: RowMap) -> torch.Tensor:
    """(B, L, ...) values aligned with a trainer's input_ids -> (num_responses, max_R, ...)
    response layout, zeros past each response's end. Differentiable."""
    if tuple(row_values.shape[:2]) != row_map.row_shape:
        raise ValueError(f"row_values: leading shape must be {row_map.row_shape}, got {tuple(row_values.shape)}")
    return _gather_or_zero(row_values.flatten(0, 1), row_map.source_index)


def unpack_to_rows(values: torch.Tensor, row_map: RowMap) -> torch.Tensor:
    """(num_responses, max_R, ...) response-layout values (e.g. `response_logprobs`) -> (B, L, ...)
    aligned with the trainer's input_ids: each value sits at its response token's position,
    zeros on prompt and padding positions. The inverse of `rows_to_responses`. Differentiable."""
    expected = tuple(row_map.source_index.shape)
    if tuple(values.shape[:2]) != expected:
        raise ValueError(
            f"values: leading shape must be (num_responses, max_R) = {expected}, got {tuple(values.shape)}"
        )
    return _gather_or_zero(values.flatten(0, 1), row_map.response_index)


def unpack_tokens_to_rows(token_values: torch.Tensor, row_map: RowMap) -> torch.Tensor:
    """(1, T, ...) or (T, ...) per-packed-token values (hidden states, logits) -> (B, L, ...),
    each row getting the shared prompt values of its group; zeros on padding. Differentiable
    (the gradient of a shared prompt token is the sum over the rows that use it)."""
    if token_values.dim() >= 2 and token_values.shape[0] == 1:  # T >= 2 always: this is a batch dim
        token_values = token_values[0]
    if token_values.shape[0] != row_map.num_tokens:
        raise ValueError(
            f"token_values: expected (1, T, ...) or (T, ...) with T = {row_map.num_tokens}, "
            f"got {tuple(token_values.shape)}"
        )
    return _gather_or_zero(token_values, row_map.token_index)


def _gather_or_zero(flat_values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """flat_values[index] with zeros where index == -1; shape index.shape + flat_values.shape[1:]."""
    index = index.to(flat_values.device)
    gathered = flat_values[index.clamp(min=0)]
    keep = (index >= 0).view(*index.shape, *([1] * (flat_values.dim() - 1)))
    return torch.where(keep, gathered, torch.zeros((), dtype=gathered.dtype, device=gathered.device))


def _packed_batch(input_ids: torch.Tensor, prompt_lengths: list[int], response_lengths: list[list[int]]) -> PackedBatch:
    layout = Layout.from_lengths(prompt_lengths, response_lengths)
    response_begins, last_prompt_rows, groups = [], [], []
    row = 0
    for g, (p, group) in enumerate(zip(prompt_lengths, response_lengths)):
        row += p
        prompt_end = row
        for r in group:
            response_begins.append(row)
            last_prompt_rows.append(prompt_end - 1)
            groups.append(g)
            row += r
    lengths = torch.tensor([r for group in response_lengths for r in group], dtype=torch.long)
    columns = torch.arange(int(lengths.max()))[None, :]
    mask = columns < lengths[:, None]
    token_rows = torch.where(mask, torch.tensor(response_begins)[:, None] + columns, 0)
    score_rows = torch.where(columns == 0, torch.tensor(last_prompt_rows)[:, None], token_rows - 1)
    return PackedBatch(
        input_ids=input_ids.long(),
        # Prompt 0..P-1, each response P..P+R-1: the positions it has in its own N-copy row.
        position_ids=layout.position_ids.cpu()[None, :],
        layout=layout,
        response_group=torch.tensor(groups, dtype=torch.long),
        response_lengths=lengths,
        response_mask=mask,
        token_rows=token_rows,
        score_rows=torch.where(mask, score_rows, 0),
    )


def _check_sequence(value, name: str, items: str) -> None:
    """A list or tuple (anything with a length and indexing), not a one-pass iterator."""
    if isinstance(value, (str, bytes, torch.Tensor)) or not isinstance(value, Sequence):
        raise TypeError(f"{name}: expected a list or tuple of {items}, got {type(value).__name__}")


def _token_tensor(tokens: Sequence[int] | torch.Tensor, name: str) -> torch.Tensor:
    if isinstance(tokens, Sequence) and not isinstance(tokens, (str, bytes)):
        _check_python_ids(tokens, name)
    try:
        tensor = torch.as_tensor(tokens)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise TypeError(f"{name}: expected a sequence of token ids, got {type(tokens).__name__}") from None
    if tensor.dim() != 1 or tensor.numel() == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D sequence of token ids, got shape {tuple(tensor.shape)}")
    _check_token_ids(tensor, name)
    return tensor.long().cpu()


def _check_python_ids(tokens: Sequence, name: str) -> None:
    """Python ints must fit the int64 ids are stored as (torch would only say it cannot convert)."""
    for index, token in enumerate(tokens):
        if isinstance(token, int) and not isinstance(token, bool) and not -(2**63) <= token < 2**63:
            raise ValueError(f"{name}[{index}]: token id {token} does not fit in int64 (token ids are int64)")


# Unsigned dtypes beyond uint8 have few PyTorch operations (not even min); ids are int64 anyway.
_UNSUPPORTED_ID_DTYPES = tuple(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name))


def _check_id_dtype(tensor: torch.Tensor, name: str) -> None:
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise ValueError(f"{name}: expected integer token ids, got {tensor.dtype}")
    if tensor.dtype in _UNSUPPORTED_ID_DTYPES:
        raise ValueError(f"{name}: token ids of dtype {tensor.dtype} are not supported; pass int64 (or int32) ids")
    if tensor.device.type == "meta":
        raise ValueError(f"{name}: a tensor on the meta device holds no token ids")


def _check_token_ids(tensor: torch.Tensor, name: str) -> None:
    """Integer ids, none negative: a negative id indexes an embedding from its end or fails on the
    device, far from the call that introduced it."""
    _check_id_dtype(tensor, name)
    if tensor.numel() and int(tensor.min()) < 0:
        raise ValueError(f"{name}: token ids must be >= 0, got {int(tensor.min())}")


def _check_rows_tensor(tensor: torch.Tensor, name: str, like: torch.Tensor | None = None) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
        shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise ValueError(f"{name}: expected a (B, L) tensor, got {shape}")
    if like is not None and tensor.shape != like.shape:
        raise ValueError(f"{name}: shape {tuple(tensor.shape)} must equal input_ids' {tuple(like.shape)}")
    return tensor.cpu()


def _check_per_row(values: torch.Tensor | Sequence[int], name: str, num_rows: int) -> torch.Tensor:
    tensor = torch.as_tensor(values).cpu()
    if tensor.shape != (num_rows,):
        raise ValueError(f"{name}: expected one integer per row, shape ({num_rows},), got {tuple(tensor.shape)}")
    if tensor.dtype.is_floating_point or tensor.dtype == torch.bool:
        raise ValueError(f"{name}: expected integers, got {tensor.dtype}")
    return tensor.long()


def _real_token_spans(real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[start, end) of each row's real tokens; raises unless they form one contiguous run."""
    counts = real.sum(dim=1)
    empty = (counts == 0).nonzero()
    if empty.numel():
        raise ValueError(f"attention_mask: row {int(empty[0])} has no real token")
    columns = torch.arange(real.shape[1])
    starts = torch.where(real, columns, real.shape[1]).min(dim=1).values
    ends = torch.where(real, columns, -1).max(dim=1).values + 1
    holes = (ends - starts != counts).nonzero()
    if holes.numel():
        raise ValueError(
            f"attention_mask: row {int(holes[0])} has padding between real tokens; only left/right padding is supported"
        )
    return starts, ends


def _prompt_ends_from_response_mask(response: torch.Tensor, real: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    outside = (response & ~real).any(dim=1).nonzero()
    if outside.numel():
        raise ValueError(f"response_mask: row {int(outside[0])} marks a padding position as a response token")
    missing = (~response.any(dim=1)).nonzero()
    if missing.numel():
        raise ValueError(f"response_mask: row {int(missing[0])} has no response token")
    return torch.where(response, torch.arange(response.shape[1]), response.shape[1]).min(dim=1).values


def _rows_by_group(group_ids: list[int]) -> list[list[int]]:
    """Row indices per group, groups in order of first appearance."""
    rows: dict[int, list[int]] = {}
    for b, g in enumerate(group_ids):
        rows.setdefault(g, []).append(b)
    return list(rows.values())


def _check_row_spans(starts: list[int], ends: list[int], prompt_ends: list[int], prompt_source: str) -> None:
    for b, (start, end, prompt_end) in enumerate(zip(starts, ends, prompt_ends)):
        if prompt_end <= start:
            raise ValueError(f"{prompt_source}: row {b} has an empty prompt; every prompt needs >= 1 token")
        if prompt_end >= end:
            raise ValueError(
                f"{prompt_source}: row {b} leaves no response token before the row's padding; "
                "every response needs >= 1 token"
            )


def _check_identical_prompts(
    input_ids: torch.Tensor,
    group_ids: list[int],
    starts: list[int],
    prompt_ends: list[int],
    rows_by_group: list[list[int]],
) -> None:
    for rows in rows_by_group:
        first = rows[0]
        prompt = input_ids[first, starts[first] : prompt_ends[first]]
        for b in rows[1:]:
            other = input_ids[b, starts[b] : prompt_ends[b]]
            if other.shape != prompt.shape or not torch.equal(other, prompt):
                raise ValueError(
                    f"input_ids: row {b} of group {group_ids[first]} holds a different prompt ({other.numel()} "
                    f"tokens) than row {first} ({prompt.numel()} tokens) of the same group; all rows with one "
                    "group_ids value must share an identical prompt"
                )
