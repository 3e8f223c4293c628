"""Rollout batches for the policy update: prompt groups with their sampled responses and rewards.

A file holds one group per JSON line:
    {"prompt": [token ids], "responses": [[token ids], ...], "rewards": [one float per response]}
The synthetic generator draws the same structure from a seed (random ids, ragged lengths), for
runs and benchmarks without a rollout engine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RolloutGroup", "load_jsonl", "synthetic_rollouts"]


@dataclass(frozen=True)
class RolloutGroup:
    """One prompt and the N >= 1 responses sampled from it, with one scalar reward each."""

    prompt: tuple[int, ...]
    responses: tuple[tuple[int, ...], ...]
    rewards: tuple[float, ...]

    def __post_init__(self):
        if not self.prompt:
            raise ValueError("prompt: needs at least one token")
        if not self.responses:
            raise ValueError("responses: a group needs at least one response")
        empty = [i for i, r in enumerate(self.responses) if not r]
        if empty:
            raise ValueError(f"responses[{empty[0]}]: needs at least one token")
        if len(self.rewards) != len(self.responses):
            raise ValueError(f"rewards: expected one per response ({len(self.responses)}), got {len(self.rewards)}")


def load_jsonl(path: str | Path) -> list[RolloutGroup]:
    """Reads one RolloutGroup per non-empty line; an error names the line and the field."""
    groups = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                groups.append(
                    RolloutGroup(
                        _ids(record["prompt"], "prompt"),
                        tuple(_ids(r, f"responses[{i}]") for i, r in enumerate(record["responses"])),
                        tuple(float(x) for x in record["rewards"]),
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                detail = f"missing field {error}" if isinstance(error, KeyError) else str(error)
                raise ValueError(f"{path}:{number}: {detail}") from None
    if not groups:
        raise ValueError(f"{path}: no rollout group in the file")
    return groups


def synthetic_rollouts(
    num_groups: int,
    responses_per_group: int,
    prompt_length: int,
    response_lengths: tuple[int, int],
    vocab_size: int,
    seed: int = 0,
) -> list[RolloutGroup]:
    """num_groups groups of one prompt of prompt_length ids and responses_per_group responses whose
    lengths are uniform in [response_lengths[0], response_lengths[1]] (ragged, as EOS makes
    them); ids uniform in [1, vocab_size), rewards uniform in [0, 1)."""
    low, high = response_lengths
    if not 1 <= low <= high:
        raise ValueError(f"response_lengths: expected 1 <= low <= high, got {response_lengths}")
    for name, value in (("num_groups", num_groups), ("responses_per_group", responses_per_group),
                        ("prompt_length", prompt_length)):
        if value < 1:
            raise ValueError(f"{name}: must be >= 1, got {value}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size: must be >= 2, got {vocab_size}")
    rng = random.Random(seed)

    def tokens(n):
        return tuple(rng.randrange(1, vocab_size) for _ in range(n))

    return [
        RolloutGroup(
            tokens(prompt_length),
            tuple(tokens(rng.randint(low, high)) for _ in range(responses_per_group)),
            tuple(rng.random() for _ in range(responses_per_group)),
        )
        for _ in range(num_groups)
    ]


def _ids(values: Sequence, name: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name}: expected a list of token ids, got {type(values).__name__}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(f"{name}: token ids must be non-negative integers")
    return tuple(values)
