"""Per-response log-probs from sequence-sharded logits or hidden states, never gathering (T, vocab).

Each rank scores the response tokens whose scoring row it holds: token j > 0 of a response by
the response's own row j - 1, token 0 by the group's last prompt row (wherever that row lives,
its rank scores the first token of all N responses). One all-reduce of the (num_responses, max_R)
results makes them identical on every rank.

Gradient convention: the backward of that all-reduce is an all-reduce of the incoming gradients,
the exact adjoint when every rank computes the same loss from the replicated log-probs. Each
rank's parameter gradients are then W times its share, and their mean over the sequence-parallel
group is the gradient of the unsharded computation: what FSDP or DDP produce when the SP ranks
belong to the data-parallel mesh they average over (veRL and torchtitan do the same).
"""

from __future__ import annotations

import torch
from torch.distributed.nn.functional import all_reduce

from ..logprobs import _rows_2d, _scores_from_hidden, _scores_from_logits, _select
from .sequence import SequenceShard

__all__ = ["sharded_response_logprobs", "sharded_response_logprobs_from_hidden"]


def sharded_response_logprobs(
    logits: torch.Tensor,
    shard: SequenceShard,
    *,
    temperature: float = 1.0,
    return_entropy: bool = False,
    chunk_rows: int | None = None,
):
    """`dualkv.response_logprobs` for this rank's logits (1, T_local, vocab) or (T_local, vocab)
    of `shard`; returns the whole batch's (num_responses, max_R) float32 log-probs (and entropies
    with return_entropy) on every rank. Collective over the shard's group."""
    logits2d = _rows_2d(logits, shard.local_tokens, "logits", "rows of this rank's sequence shard")
    scores = _scores_from_logits(logits2d, shard.packed, shard.first_row, temperature, chunk_rows)
    return _replicate(scores, shard, return_entropy)


def sharded_response_logprobs_from_hidden(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    shard: SequenceShard,
    *,
    temperature: float = 1.0,
    return_entropy: bool = False,
    chunk_rows: int | None = None,
):
    """`dualkv.response_logprobs_from_hidden` for this rank's final hidden states (1, T_local, D)
    or (T_local, D) of `shard`; the whole batch's results on every rank. Collective."""
    hidden2d = _rows_2d(hidden_states, shard.local_tokens, "hidden_states", "rows of this rank's sequence shard")
    scores = _scores_from_hidden(hidden2d, lm_head_weight, shard.packed, shard.first_row, temperature, chunk_rows)
    return _replicate(scores, shard, return_entropy)


def _replicate(scores, shard: SequenceShard, return_entropy: bool):
    """Sums the ranks' disjoint shares (each token is scored by exactly one rank)."""
    wanted = scores if return_entropy else scores[:1]
    summed = tuple(all_reduce(values, group=shard.group) for values in wanted)
    return _select(summed, return_entropy)
