"""Packing multi-turn, branching rollouts into a tree layout: every common prefix stored once.

    batch = dualkv.pack_trajectories([
        [Turn(system_and_task, False), Turn(answer_1, True), Turn(tool_output, False), Turn(answer_2, True)],
        [Turn(system_and_task, False), Turn(answer_1, True), Turn(other_output, False), Turn(answer_3, True)],
    ])
    logits = model(input_ids=batch.input_ids, position_ids=batch.position_ids, dualkv_layout=batch.layout).logits
    logprobs = dualkv.response_logprobs(logits, batch)  # (num_trajectories, max trained tokens)

Trajectories are merged into a trie by exact token prefix (never by text): wherever two of them
hold the same tokens from their start, those tokens are one segment, computed once; they part
into child segments at the first token that differs (mid-turn if that is where they differ). The
trie is packed depth-first, so every subtree is contiguous. A trajectory's tokens have the
positions they have in the trajectory alone (position ids continue along the path).

The result is a PackedBatch whose "responses" are the trajectories, in order: row i of
token_rows / score_rows / response_mask lists trajectory i's trained tokens, each with the packed
row of its token and of the token before it on the path (the log-prob of a token comes from the
logits of the previous token, which may be the last token of the parent segment). A trained token
shared by k trajectories is computed once, and appears in k rows, so `response_logprobs` and the
losses count it once per trajectory, with that trajectory's advantage: the loss and its gradients
equal the per-trajectory (N-copy) computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ._layout import Layout
from .packing import PackedBatch, _check_token_ids

__all__ = ["Turn", "pack_trajectories", "trajectory_rows"]


class Turn(NamedTuple):
    """One turn of a trajectory: its exact token ids and whether the policy generated them
    (trained: the loss scores them) or not (system, user, tool)."""

    token_ids: Sequence[int] | torch.Tensor
    trained: bool


class _Node:
    """A trie segment: a run of tokens shared by every trajectory through it."""

    __slots__ = ("tokens", "children", "segment", "begin")

    def __init__(self, tokens: list[int]):
        self.tokens = tokens
        self.children: dict[int, _Node] = {}  # by first token, in insertion order
        self.segment = -1
        self.begin = 0  # packed row of its first token


class _Trie:
    """Token sequences merged by exact prefix; the root holds no tokens, its children are the
    roots of the forest."""

    def __init__(self, sequences: Sequence[list[int]]):
        self.root = _Node([])
        for tokens in sequences:
            self._insert(tokens)

    def _insert(self, tokens: list[int]) -> None:
        """Adds a token sequence, splitting a segment where the sequence leaves it."""
        node, i = self.root, 0
        while i < len(tokens):
            child = node.children.get(tokens[i])
            if child is None:
                node.children[tokens[i]] = _Node(tokens[i:])
                return
            shared = _common_prefix(child.tokens, tokens, i)
            if i + shared == len(tokens):
                return  # it ends inside (or at the end of) this segment: a prefix of what is there
            if shared < len(child.tokens):
                # The sequence leaves this segment inside it: the shared head becomes a segment of
                # its own, parent of the rest.
                head = _Node(child.tokens[:shared])
                child.tokens = child.tokens[shared:]
                head.children[child.tokens[0]] = child
                node.children[tokens[i]] = head
                child = head
            node, i = child, i + shared

    def path(self, tokens: list[int]) -> list[tuple[_Node, int]]:
        """The segments a sequence in the trie runs through, each with how many of its tokens it
        takes (all but, perhaps, in the last: a sequence may end inside a segment)."""
        steps: list[tuple[_Node, int]] = []
        node, i = self.root, 0
        while i < len(tokens):
            node = node.children[tokens[i]]
            take = min(len(node.tokens), len(tokens) - i)
            steps.append((node, take))
            i += take
        return steps

    def rows(self, tokens: list[int]) -> list[int]:
        """The packed row of each token of a sequence in the trie (after pack_depth_first)."""
        return [row for node, take in self.path(tokens) for row in range(node.begin, node.begin + take)]

    def pack_depth_first(self) -> tuple[list[int], list[int], list[_Node]]:
        """Numbers the segments in depth-first (pre-)order and places them back to back: their
        parents and lengths in that order, and the segments."""
        parents: list[int] = []
        lengths: list[int] = []
        segments: list[_Node] = []
        row = 0
        stack = [(child, -1) for child in reversed(list(self.root.children.values()))]
        while stack:
            node, parent = stack.pop()
            node.segment, node.begin = len(segments), row
            row += len(node.tokens)
            parents.append(parent)
            lengths.append(len(node.tokens))
            segments.append(node)
            stack += [(child, node.segment) for child in reversed(list(node.children.values()))]
        return parents, lengths, segments


def _common_prefix(segment: list[int], tokens: list[int], start: int) -> int:
    n = min(len(segment), len(tokens) - start)
    k = 0
    while k < n and segment[k] == tokens[start + k]:
        k += 1
    return k


@torch.inference_mode(False)
def pack_trajectories(
    trajectories: Sequence[Sequence[Turn | tuple]], *, group_ids: Sequence[int] | torch.Tensor | None = None
) -> PackedBatch:
    """Packs trajectories (each a non-empty list of turns, `Turn(token_ids, trained)` or
    `(token_ids, trained)` pairs) into one tree layout.

    group_ids: the GRPO/DAPO group of each trajectory (`response_group`, for
    `losses.group_advantages`); by default trajectories with the same prompt, all the tokens
    before their first trained one, form a group (groups numbered in order of first appearance).
    """
    flat = flatten_trajectories(trajectories)
    trie = _Trie([tokens for tokens, _ in flat])
    parents, lengths, segments = trie.pack_depth_first()
    layout = Layout.from_tree(parents, lengths)
    input_ids = torch.tensor([t for node in segments for t in node.tokens], dtype=torch.long)[None, :]
    token_rows, score_rows, trained_counts = [], [], []
    for i, (tokens, trained) in enumerate(flat):
        rows = trie.rows(tokens)
        trained_at = [j for j, flag in enumerate(trained) if flag]
        if trained_at and trained_at[0] == 0:
            raise ValueError(
                f"trajectories[{i}]: its first token is trained, but no earlier token's logits predict it; "
                "the first turn must hold at least one untrained token (the prompt)"
            )
        token_rows.append([rows[j] for j in trained_at])
        score_rows.append([rows[j - 1] for j in trained_at])
        trained_counts.append(len(trained_at))
    if max(trained_counts) == 0:
        raise ValueError("trajectories: no turn is trained; at least one token must be scored")
    groups = _groups(flat, group_ids)
    lengths_tensor = torch.tensor(trained_counts, dtype=torch.long)
    columns = torch.arange(int(lengths_tensor.max()))[None, :]
    mask = columns < lengths_tensor[:, None]
    return PackedBatch(
        input_ids=input_ids,
        position_ids=layout.position_ids[None, :],
        layout=layout,
        response_group=groups,
        response_lengths=lengths_tensor,
        response_mask=mask,
        token_rows=_padded(token_rows, mask),
        score_rows=_padded(score_rows, mask),
    )


def trajectory_rows(trajectories) -> list[list[int]]:
    """The packed row of every token of every trajectory in `pack_trajectories(trajectories)`:
    what gathers a trajectory's rows out of the packed stream (to run it alone, say)."""
    flat = flatten_trajectories(trajectories)
    trie = _Trie([tokens for tokens, _ in flat])
    trie.pack_depth_first()
    return [trie.rows(tokens) for tokens, _ in flat]


def flatten_trajectories(trajectories) -> list[tuple[list[int], list[bool]]]:
    """Each trajectory's tokens and, per token, whether it is trained; checks every turn."""
    if isinstance(trajectories, (str, bytes, torch.Tensor)) or len(trajectories) == 0:
        raise ValueError("trajectories: expected a non-empty list of trajectories (each a list of turns)")
    return [_flatten(trajectory, f"trajectories[{i}]") for i, trajectory in enumerate(trajectories)]


def _flatten(trajectory, name: str) -> tuple[list[int], list[bool]]:
    """The trajectory's tokens and, per token, whether it is trained."""
    if isinstance(trajectory, (str, bytes, torch.Tensor)) or len(trajectory) == 0:
        raise ValueError(f"{name}: expected a non-empty list of turns (token_ids, trained)")
    tokens: list[int] = []
    trained: list[bool] = []
    for t, turn in enumerate(trajectory):
        turn_name = f"{name}[{t}]"
        if isinstance(turn, (str, bytes)) or not isinstance(turn, Sequence) or len(turn) != 2:
            raise TypeError(f"{turn_name}: expected a Turn(token_ids, trained) or a (token_ids, trained) pair")
        token_ids, is_trained = turn
        if not isinstance(is_trained, bool):
            raise TypeError(f"{turn_name}.trained: expected a bool, got {type(is_trained).__name__}")
        try:
            ids = torch.as_tensor(token_ids)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"{turn_name}.token_ids: expected a sequence of token ids, got {type(token_ids).__name__}"
            ) from None
        if ids.dim() != 1 or ids.numel() == 0:
            raise ValueError(
                f"{turn_name}.token_ids: expected a non-empty 1-D sequence of token ids, got shape {tuple(ids.shape)}"
            )
        _check_token_ids(ids, f"{turn_name}.token_ids")
        tokens += ids.tolist()
        trained += [is_trained] * ids.numel()
    return tokens, trained


def _groups(flat, group_ids) -> torch.Tensor:
    if group_ids is not None:
        groups = torch.as_tensor(group_ids)
        if groups.shape != (len(flat),) or groups.dtype.is_floating_point or groups.dtype == torch.bool:
            raise ValueError(
                f"group_ids: expected one integer per trajectory, shape ({len(flat)},), got "
                f"{tuple(groups.shape)} {groups.dtype}"
            )
        return groups.long().cpu()
    numbers: dict[tuple[int, ...], int] = {}
    groups = []
    for tokens, trained in flat:
        prompt_end = trained.index(True) if True in trained else len(tokens)
        groups.append(numbers.setdefault(tuple(tokens[:prompt_end]), len(numbers)))
    return torch.tensor(groups, dtype=torch.long)


def _padded(rows: list[list[int]], mask: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(mask.shape, dtype=torch.long)
    for i, values in enumerate(rows):
        out[i, : len(values)] = torch.tensor(values, dtype=torch.long)
    return out
