"""Group-aware micro-batching: which prompt groups each data-parallel rank packs into each micro-batch.

A packed micro-batch stores each prompt once for all its responses, so the unit of work is a
prompt group, sized in packed tokens P + sum R. The plan
1. keeps every group whole, unless P + sum R exceeds the token budget: only then is it split into
   slices (each a subset of its responses with the prompt repeated, first-fit decreasing, so two
   slices of one group never fit one micro-batch together), and the plan lists it in
   `split_groups`;
2. assigns slices to data-parallel ranks, largest first onto the least-loaded rank, which balances
   packed tokens to within one slice;
3. packs each rank's slices into micro-batches of at most `max_tokens` packed tokens
   (first-fit decreasing), then splits multi-slice micro-batches, never a slice, until every rank
   has the same number of micro-batches where its slices allow (FSDP runs collectives per
   micro-batch, so ranks step together).
Nothing requires the batch size, N or the micro-batch size to divide one another. Every rank
computes the same plan from the same lengths, so no communication is needed.

Trajectories of tree layouts (`plan_trajectory_microbatches`): the unit is a tree of the trie
that `pack_trajectories` builds (trajectories that share a first token), sized in its packed
tokens. A tree is kept whole unless it exceeds the budget; then it is split top-down (a subtree
that fits is one piece, a larger one is split among its children, the trajectories that end
inside a segment pieces of their own) and the pieces are merged back first-fit-decreasing into
slices that fit, each slice holding its shared prefix again. Steps 2 and 3 are as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._layout import _as_int32
from .packing import PackedBatch, pack
from .trajectories import _Trie, flatten_trajectories, pack_trajectories

__all__ = [
    "GroupSlice",
    "MicroBatch",
    "MicroBatchPlan",
    "pack_microbatch",
    "pack_trajectory_microbatch",
    "plan_microbatches",
    "plan_trajectory_microbatches",
]


@dataclass(frozen=True)
class GroupSlice:
    """Responses `responses` (indices into the group's responses, increasing) of prompt group
    `group`, packed with their prompt: `tokens` = P + their sum of R. For trajectories: tree
    `group`'s trajectories `responses` (indices into the whole batch's trajectories), `tokens`
    their packed tokens."""

    group: int
    responses: tuple[int, ...]
    tokens: int


@dataclass(frozen=True)
class MicroBatch:
    """Slices packed together, each its own layout group (distinct prompt groups, in this order)."""

    slices: tuple[GroupSlice, ...]

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.slices)

    @property
    def responses(self) -> list[tuple[int, int]]:
        """(group, response index) of every response, in the packed order of `pack_microbatch`."""
        return [(s.group, i) for s in self.slices for i in s.responses]


@dataclass(frozen=True)
class MicroBatchPlan:
    """ranks[r]: rank r's micro-batches, in execution order. split_groups: the groups that exceeded
    max_tokens and were split across micro-batches (their prompt is stored once per slice)."""

    ranks: tuple[tuple[MicroBatch, ...], ...]
    split_groups: tuple[int, ...]
    max_tokens: int

    @property
    def num_steps(self) -> int:
        """Micro-batch steps every rank takes: the most any rank has. A rank with fewer slices
        than that cannot split further; the trainer repeats one of its micro-batches with weight 0."""
        return max(len(batches) for batches in self.ranks)

    def rank_tokens(self) -> list[int]:
        """Packed tokens per rank."""
        return [sum(mb.tokens for mb in batches) for batches in self.ranks]


def plan_microbatches(
    prompt_lengths: Sequence[int],
    response_lengths: Sequence[Sequence[int]],
    *,
    max_tokens: int,
    dp_size: int = 1,
) -> MicroBatchPlan:
    """Plans micro-batches of at most `max_tokens` packed tokens for `dp_size` data-parallel ranks.

    prompt_lengths[g] = P_g >= 1; response_lengths[g] = the N_g >= 1 lengths R_g,i >= 1 of group
    g's responses. Every [prompt; response] must fit: P_g + R_g,i <= max_tokens. There must be
    at least dp_size slices (groups, after splitting), so that no rank is left without data.
    """
    prompts, responses = _check_lengths(prompt_lengths, response_lengths)
    max_tokens = _positive_int(max_tokens, "max_tokens")
    dp_size = _positive_int(dp_size, "dp_size")
    slices, split_groups = [], []
    for g, (p, lengths) in enumerate(zip(prompts, responses)):
        longest = max(range(len(lengths)), key=lengths.__getitem__)
        if p + lengths[longest] > max_tokens:
            raise ValueError(
                f"max_tokens: group {g}'s prompt ({p} tokens) with its response {longest} ({lengths[longest]} tokens) "
                f"needs {p + lengths[longest]} packed tokens, more than max_tokens = {max_tokens}"
            )
        group_slices = _split_group(g, p, lengths, max_tokens)
        slices += group_slices
        if len(group_slices) > 1:
            split_groups.append(g)
    return _plan_from_slices(slices, split_groups, max_tokens, dp_size, "prompt groups")


def plan_trajectory_microbatches(trajectories, *, max_tokens: int, dp_size: int = 1) -> MicroBatchPlan:
    """Plans micro-batches of at most `max_tokens` packed tokens of trajectories (each a list of
    turns, as `pack_trajectories` takes them) for `dp_size` data-parallel ranks.

    Every trajectory must fit alone. There must be at least dp_size slices (trees, after
    splitting). A slice's `responses` are indices into `trajectories`.
    """
    flat = flatten_trajectories(trajectories)
    max_tokens = _positive_int(max_tokens, "max_tokens")
    dp_size = _positive_int(dp_size, "dp_size")
    for i, (tokens, _) in enumerate(flat):
        if len(tokens) > max_tokens:
            raise ValueError(
                f"max_tokens: trajectories[{i}] alone has {len(tokens)} tokens, more than max_tokens = {max_tokens}"
            )
    trie = _Trie([tokens for tokens, _ in flat])
    paths = [trie.path(tokens) for tokens, _ in flat]
    trees: dict[int, list[int]] = {}  # by root segment, in order of first appearance
    for i, path in enumerate(paths):
        trees.setdefault(id(path[0][0]), []).append(i)
    slices, split_trees = [], []
    for tree, members in enumerate(trees.values()):
        pieces = _pieces_that_fit(members, 0, paths, max_tokens)
        slices += [GroupSlice(tree, tuple(sorted(piece)), _union_tokens(piece, paths)) for piece in pieces]
        if len(pieces) > 1:
            split_trees.append(tree)
    return _plan_from_slices(slices, split_trees, max_tokens, dp_size, "trees")


def pack_trajectory_microbatch(micro_batch: MicroBatch, trajectories, *, group_ids=None) -> PackedBatch:
    """Packs one micro-batch of `plan_trajectory_microbatches` from the whole batch's trajectories;
    its trajectories come in the order of `micro_batch.responses`. group_ids (one per trajectory
    of the whole batch) keep GRPO groups across micro-batches; by default `pack_trajectories`
    numbers this micro-batch's groups by prompt."""
    indices = [i for s in micro_batch.slices for i in s.responses]
    groups = None if group_ids is None else [group_ids[i] for i in indices]
    return pack_trajectories([trajectories[i] for i in indices], group_ids=groups)


def _union_tokens(members, paths) -> int:
    """Packed tokens of the trajectories `members` together: each segment once, as far as the
    furthest of them reaches into it."""
    used: dict[int, int] = {}
    for m in members:
        for node, take in paths[m]:
            used[id(node)] = max(used.get(id(node), 0), take)
    return sum(used.values())


def _pieces_that_fit(members: list[int], depth: int, paths, max_tokens: int) -> list[list[int]]:
    """Trajectories `members`, which share their first depth + 1 segments, in pieces of at most
    max_tokens packed tokens: all together if they fit, else each child subtree's pieces and each
    trajectory that ends in the shared segment alone, merged first-fit-decreasing."""
    if _union_tokens(members, paths) <= max_tokens:
        return [members]
    by_child: dict[int, list[int]] = {}
    ended = []
    for m in members:
        if len(paths[m]) > depth + 1:
            by_child.setdefault(id(paths[m][depth + 1][0]), []).append(m)
        else:
            ended.append([m])
    pieces = [piece for child in by_child.values() for piece in _pieces_that_fit(child, depth + 1, paths, max_tokens)]
    bins: list[list[int]] = []
    for piece in sorted(pieces + ended, key=lambda p: -_union_tokens(p, paths)):
        fit = next((b for b in bins if _union_tokens(b + piece, paths) <= max_tokens), None)
        if fit is None:
            bins.append(list(piece))
        else:
            fit += piece
    return bins


def _plan_from_slices(slices, split_units, max_tokens: int, dp_size: int, units: str) -> MicroBatchPlan:
    """Steps 2 and 3 of the module docstring."""
    if len(slices) < dp_size:
        raise ValueError(
            f"dp_size: {dp_size} data-parallel ranks need at least as many {units}, got {len(slices)} "
            f"(after splitting {units} larger than max_tokens = {max_tokens})"
        )
    per_rank = _balance(slices, dp_size)
    batches = [_first_fit_decreasing(rank_slices, _slice_tokens, max_tokens) for rank_slices in per_rank]
    steps = max(len(b) for b in batches)
    ranks = tuple(tuple(MicroBatch(tuple(bin_)) for bin_ in _split_to(b, steps)) for b in batches)
    return MicroBatchPlan(ranks, tuple(split_units), max_tokens)


def pack_microbatch(
    micro_batch: MicroBatch, prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[Sequence[int]]]
) -> PackedBatch:
    """Packs one micro-batch from the token ids of the whole rollout batch (prompts[g],
    responses[g][i]); its responses come in the order of `micro_batch.responses`."""
    return pack(
        [prompts[s.group] for s in micro_batch.slices],
        [[responses[s.group][i] for i in s.responses] for s in micro_batch.slices],
    )


def _split_group(group: int, prompt: int, lengths: list[int], max_tokens: int) -> list[GroupSlice]:
    """The whole group if it fits; otherwise first-fit-decreasing bins of its responses with room
    max_tokens - P each. First fit leaves any two bins too full to share one micro-batch."""
    if prompt + sum(lengths) <= max_tokens:
        return [GroupSlice(group, tuple(range(len(lengths))), prompt + sum(lengths))]
    bins = _first_fit_decreasing(range(len(lengths)), lengths.__getitem__, max_tokens - prompt)
    return [GroupSlice(group, tuple(sorted(b)), prompt + sum(lengths[i] for i in b)) for b in bins]


def _balance(slices: list[GroupSlice], dp_size: int) -> list[list[GroupSlice]]:
    """Largest slice first onto the least-loaded rank (ties: lowest rank): the ranks' token loads
    then differ by at most one slice."""
    ranks: list[list[GroupSlice]] = [[] for _ in range(dp_size)]
    loads = [0] * dp_size
    for s in sorted(slices, key=_slice_tokens, reverse=True):
        r = min(range(dp_size), key=loads.__getitem__)
        ranks[r].append(s)
        loads[r] += s.tokens
    return ranks


def _first_fit_decreasing(items, size, capacity: int) -> list[list]:
    """Bins of total size <= capacity: items largest first (stable, so ties keep their order),
    each into the first bin with room."""
    bins: list[list] = []
    loads: list[int] = []
    for item in sorted(items, key=lambda item: -size(item)):
        b = next((b for b, load in enumerate(loads) if load + size(item) <= capacity), len(bins))
        if b == len(bins):
            bins.append([])
            loads.append(0)
        bins[b].append(item)
        loads[b] += size(item)
    return bins


def _split_to(bins: list[list[GroupSlice]], steps: int) -> list[list[GroupSlice]]:
    """Splits the bin with the most slices in halves until there are `steps` bins or every bin
    holds one slice; splitting between slices keeps every group slice whole."""
    bins = [list(b) for b in bins]
    while len(bins) < steps:
        widest = max(range(len(bins)), key=lambda b: len(bins[b]))
        if len(bins[widest]) < 2:
            break
        half = len(bins[widest]) // 2
        bins[widest:widest + 1] = [bins[widest][:half], bins[widest][half:]]
    return bins


def _slice_tokens(s: GroupSlice) -> int:
    return s.tokens


def _positive_int(value, name: str) -> int:
    value = _as_int32(value, name)
    if value < 1:
        raise ValueError(f"{name}: must be >= 1, got {value}")
    return value


def _check_lengths(prompt_lengths, response_lengths) -> tuple[list[int], list[list[int]]]:
    if len(prompt_lengths) != len(response_lengths):
        raise ValueError(
            f"response_lengths: expected one list per prompt ({len(prompt_lengths)}), got {len(response_lengths)}"
        )
    if not prompt_lengths:
        raise ValueError("prompt_lengths: at least one group is required")
    prompts = [_positive_int(p, f"prompt_lengths[{g}]") for g, p in enumerate(prompt_lengths)]
    responses = []
    for g, lengths in enumerate(response_lengths):
        if isinstance(lengths, (str, bytes)) or len(lengths) == 0:
            raise ValueError(f"response_lengths[{g}]: expected a non-empty sequence of response lengths")
        responses.append([_positive_int(r, f"response_lengths[{g}][{i}]") for i, r in enumerate(lengths)])
    return prompts, responses
