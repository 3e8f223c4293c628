"""Running a model on a sequence-sharded packed batch (Ulysses sequence parallelism).

    shard = shard_sequence(packed, group)          # this rank's rows, the layout kept global
    logits = model(**shard.model_inputs()).logits  # (1, T_local, vocab): attention runs Ulysses
    logprobs = sharded_response_logprobs(logits, shard)

The packed stream of T tokens is padded at its end to W * T_local rows (W = group size) and rank r
keeps rows [r T_local, (r+1) T_local) of input_ids and position_ids. Every layer but attention is
per token and runs on those rows unchanged; the attention function ("dualkv" in transformers)
sees a `SequenceParallelLayout` and exchanges sequence shards for head shards around the op.
Pad rows hold token 0 at position 0; they are outside the layout, so no real row attends to them
and nothing scores them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from .._layout import Layout
from ..packing import PackedBatch

__all__ = ["SequenceParallelLayout", "SequenceShard", "shard_sequence"]


@dataclass(frozen=True)
class SequenceParallelLayout:
    """What `dualkv_layout=` takes for a sequence-sharded forward: the global layout of the
    stream and the process group whose ranks hold its contiguous shards (None: the default group)."""

    layout: Layout
    group: dist.ProcessGroup | None


@dataclass(frozen=True)
class SequenceShard:
    """One rank's share of a packed batch.

    packed: the whole PackedBatch (the same on every rank: the log-probs need its maps).
    rank, world: this rank's index in `group` and the group's size W.
    input_ids, position_ids: (1, T_local) long, rows [first_row, first_row + T_local) of the stream
        padded to W * T_local.
    """

    packed: PackedBatch
    group: dist.ProcessGroup | None
    rank: int
    world: int
    input_ids: torch.Tensor
    position_ids: torch.Tensor

    @property
    def local_tokens(self) -> int:
        return self.input_ids.shape[1]

    @property
    def first_row(self) -> int:
        return self.rank * self.local_tokens

    @property
    def dualkv_layout(self) -> SequenceParallelLayout:
        return SequenceParallelLayout(self.packed.layout, self.group)

    def model_inputs(self) -> dict:
        """Keyword arguments of a transformers causal LM's forward for this shard."""
        return dict(
            input_ids=self.input_ids,
            position_ids=self.position_ids,
            dualkv_layout=self.dualkv_layout,
            use_cache=False,
        )


def shard_sequence(packed: PackedBatch, group: dist.ProcessGroup | None = None, *, min_tokens: int = 0) -> SequenceShard:
    """This rank's shard of `packed` for sequence parallelism over `group` (None: default group).

    The stream is padded to the smallest multiple of W holding max(T, min_tokens) rows; a fixed
    `min_tokens` (a bucket size) keeps shapes steady across micro-batches.
    """
    if not isinstance(packed, PackedBatch):
        raise TypeError(f"packed: expected a dualkv.PackedBatch, got {type(packed).__name__}")
    if not dist.is_initialized():
        raise RuntimeError("group: torch.distributed is not initialised (call torch.distributed.init_process_group)")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError("group: this process is not a member of the sequence-parallel group")
    local = -(-max(packed.num_tokens, min_tokens) // world)
    pad = world * local - packed.num_tokens
    rows = slice(rank * local, (rank + 1) * local)
    input_ids = torch.nn.functional.pad(packed.input_ids, (0, pad))[:, rows]
    position_ids = torch.nn.functional.pad(packed.position_ids, (0, pad))[:, rows]
    return SequenceShard(packed, group, rank, world, input_ids, position_ids)
