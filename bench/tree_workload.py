"""The tree benchmark's workload: synthetic agentic rollouts (multi-turn, tool-using, branching), the
batches each method runs them as, and the attention masks of the baselines.

A task's trajectories share its system prompt and task statement; they come in groups of
`branching` that share their first `branch_after` assistant turns (with the tool outputs after
them), and then part: every trajectory has its own later turns. Token ids are random; lengths are
drawn around the given sizes (turns within +-20% of --turn-tokens, tool outputs uniform in the
--tool-tokens range), all from one seed.
"""

from __future__ import annotations

import random

import torch

import dualkv
from dualkv import Turn
from dualkv.packing import PackedBatch


def agentic_trajectories(
    *,
    system: int,
    task: int,
    trajectories: int,
    turns: int,
    turn_tokens: int,
    tool_tokens: tuple[int, int],
    branch_after: int,
    branching: int = 2,
    vocab: int = 32000,
    seed: int = 0,
) -> list[list[Turn]]:
    rng = random.Random(seed)

    def tokens(n):
        return [rng.randrange(1, vocab) for _ in range(n)]

    def turn_length():
        return max(1, round(turn_tokens * rng.uniform(0.8, 1.2)))

    def tool_length():
        return rng.randint(*tool_tokens)

    prompt = Turn(tokens(system) + tokens(task), False)
    result = []
    for _ in range(-(-trajectories // branching)):
        shared = [prompt]
        for t in range(branch_after):
            shared.append(Turn(tokens(turn_length()), True))
            if t + 1 < turns:
                shared.append(Turn(tokens(tool_length()), False))
        for _ in range(branching):
            if len(result) == trajectories:
                break
            own = list(shared)
            for t in range(branch_after, turns):
                own.append(Turn(tokens(turn_length()), True))
                if t + 1 < turns:
                    own.append(Turn(tokens(tool_length()), False))
            result.append(own)
    return result


def agentic_forest(trees: int, *, seed: int = 0, **workload) -> list[list[Turn]]:
    """`trees` independent agentic workloads (seeds seed, seed + 1, ...) in one list: their system
    prompts differ, so packing makes one root per tree, as a micro-batch of several tasks does."""
    return [t for k in range(trees) for t in agentic_trajectories(**workload, seed=seed + k)]


def ncopy_batch(trajectories) -> PackedBatch:
    """The per-trajectory (N-copy) batch: every trajectory its own sequence, back to back (a forest
    of roots), scored like `pack_trajectories` scores it."""
    flat = [([t for ids, _ in traj for t in ids], [flag for ids, flag in traj for _ in ids]) for traj in trajectories]
    lengths = [len(tokens) for tokens, _ in flat]
    layout = dualkv.Layout.from_tree([-1] * len(flat), lengths)
    starts = layout.cu_seqlens[:-1].tolist()
    trained = [[j for j, flag in enumerate(flags) if flag] for _, flags in flat]
    width = max(len(t) for t in trained)
    token_rows = torch.zeros(len(flat), width, dtype=torch.long)
    score_rows = torch.zeros(len(flat), width, dtype=torch.long)
    for i, (start, columns) in enumerate(zip(starts, trained)):
        token_rows[i, : len(columns)] = torch.tensor(columns) + start
        score_rows[i, : len(columns)] = torch.tensor(columns) + start - 1
    counts = torch.tensor([len(t) for t in trained])
    mask = torch.arange(width)[None, :] < counts[:, None]
    return PackedBatch(
        input_ids=torch.tensor([t for tokens, _ in flat for t in tokens])[None, :],
        position_ids=layout.position_ids[None, :],
        layout=layout,
        response_group=dualkv.pack_trajectories(trajectories).response_group,
        response_lengths=counts,
        response_mask=mask,
        token_rows=token_rows,
        score_rows=score_rows,
    )


def ancestors(layout: dualkv.Layout) -> torch.Tensor:
    """(S, S) bool: [s, a] iff segment a is s or one of its ancestors."""
    parents = layout.parents.tolist()
    table = torch.eye(len(parents), dtype=torch.bool)
    for s, parent in enumerate(parents):
        if parent >= 0:
            table[s] |= table[parent]
    return table


def visible_pairs(layout: dualkv.Layout) -> int:
    """Query-key pairs the tree mask allows: per segment, its length times its ancestors' tokens
    plus L (L + 1) / 2."""
    lengths = layout.segment_lengths
    begins = layout.position_ids[layout.cu_seqlens[:-1].long()].tolist()
    return sum(n * b + n * (n + 1) // 2 for n, b in zip(lengths, begins))


def subtree_ends(layout: dualkv.Layout) -> list[int] | None:
    """end[s]: one past the last segment of s's subtree when every subtree is a contiguous run of
    segments starting at its root (pre-order, as pack_trajectories packs its trie); else None."""
    parents = layout.parents.tolist()
    end, size = list(range(1, len(parents) + 1)), [1] * len(parents)
    for s in reversed(range(len(parents))):  # children follow their parent: sizes bottom-up
        if parents[s] >= 0:
            end[parents[s]] = max(end[parents[s]], end[s])
            size[parents[s]] += size[s]
    return end if all(end[s] - s == size[s] for s in range(len(parents))) else None


def flex_tree_block_mask(layout: dualkv.Layout, device):
    """The tree's visibility rule as a FlexAttention block mask over the packed stream. In
    pre-order, segment a is an ancestor of (or is) s iff a <= s < end[a]: the rule then reads only
    per-token int32 tables at q and k, as the two-level rule does. FlexAttention's FlashAttention-4
    backend refuses the general form's (S, S) table indexed by loaded segment ids ("store Int64 to
    Tensor with element type Int32"), which is kept for layouts not in pre-order."""
    from torch.nn.attention.flex_attention import create_block_mask

    segment = layout.segment_ids.to(device, torch.int32)
    ends = subtree_ends(layout)
    if ends is not None:
        end_of_token = torch.tensor(ends, dtype=torch.int32, device=device)[segment.long()]

        def visible(batch, head, q, k):
            return (k <= q) & (segment[k] <= segment[q]) & (segment[q] < end_of_token[k])

    else:
        seen = ancestors(layout).to(device)

        def visible(batch, head, q, k):
            return (k <= q) & seen[segment[q], segment[k]]

    return create_block_mask(visible, None, None, layout.num_tokens, layout.num_tokens, device=device)
