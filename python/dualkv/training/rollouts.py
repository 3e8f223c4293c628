"""Rollout batches for the policy update: prompt groups with their sampled responses and rewards.

A file holds one group per record, with three fields:
    prompt: [token ids], responses: [[token ids], ...], rewards: [one number per response]
as one JSON object per line (.jsonl) or one row per group of a parquet table with those three
columns (.parquet; needs pyarrow, the `parquet` extra). Both formats go through the same record
check, so a malformed group gives the same error whichever file it came from, prefixed with the
file and the line or row. The synthetic generator draws the same structure from a seed (random
ids, ragged lengths), for runs and benchmarks without a rollout engine.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ROLLOUT_SUFFIXES",
    "RolloutGroup",
    "TrajectoryGroup",
    "load_jsonl",
    "load_parquet",
    "load_rollouts",
    "synthetic_rollouts",
]

FIELDS = ("prompt", "responses", "rewards")
ROLLOUT_SUFFIXES = (".jsonl", ".parquet")


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


@dataclass(frozen=True)
class TrajectoryGroup:
    """A GRPO/DAPO group of multi-turn trajectories (each a list of turns, `dualkv.Turn(token_ids,
    trained)`, as `dualkv.pack_trajectories` takes them), with one scalar reward each. The policy
    update packs them into tree layouts, every common prefix once."""

    trajectories: tuple
    rewards: tuple[float, ...]

    def __post_init__(self):
        if not self.trajectories:
            raise ValueError("trajectories: a group needs at least one trajectory")
        if len(self.rewards) != len(self.trajectories):
            raise ValueError(
                f"rewards: expected one per trajectory ({len(self.trajectories)}), got {len(self.rewards)}"
            )


def load_rollouts(path: str | Path, vocab_size: int | None = None) -> list[RolloutGroup]:
    """Reads a rollout file, its format chosen by its suffix (ROLLOUT_SUFFIXES). vocab_size: the
    model's vocabulary (its embedding rows); a token id outside it is an error naming the file,
    the line or row, and the field."""
    suffix = Path(path).suffix.lower()
    if suffix == ".jsonl":
        return load_jsonl(path, vocab_size)
    if suffix == ".parquet":
        return load_parquet(path, vocab_size)
    raise ValueError(f"path: expected a rollout file ending in one of {ROLLOUT_SUFFIXES}, got {str(path)!r}")


def load_jsonl(path: str | Path, vocab_size: int | None = None) -> list[RolloutGroup]:
    """Reads one RolloutGroup per non-empty line; an error names the line and the field."""

    def records() -> Iterator[tuple[str, object]]:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not a JSON object ({error})") from None
                yield f"{path}:{number}", record

    return _groups(path, records(), vocab_size)


def load_parquet(path: str | Path, vocab_size: int | None = None) -> list[RolloutGroup]:
    """Reads one RolloutGroup per row of a parquet table with the columns prompt (list of ids),
    responses (list of lists of ids) and rewards (list of numbers); extra columns are ignored.
    An error names the row (0-based) and the field; a missing column is named before any row is
    read."""
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(
            f"reading the parquet rollout file {path} needs pyarrow: pip install 'dualkv[parquet]' "
            "(or pip install pyarrow), or convert the file to JSONL"
        ) from error
    try:
        parquet = pq.ParquetFile(path)
    except pyarrow.ArrowException as error:  # not parquet; a missing file stays a FileNotFoundError
        raise ValueError(f"{path}: not a readable parquet file ({error})") from None
    _check_parquet_schema(path, parquet.schema_arrow)

    def records() -> Iterator[tuple[str, object]]:
        row = 0
        # A record batch at a time: a large file never exists as Python objects all at once.
        for batch in parquet.iter_batches(columns=list(FIELDS)):
            for record in batch.to_pylist():
                yield f"{path}: row {row}", record
                row += 1

    return _groups(path, records(), vocab_size)


def _check_parquet_schema(path: str | Path, schema) -> None:
    """The three columns exist with list types of integer ids and numeric rewards. A float id
    column is refused here: pyarrow widens a whole column to float when one row has a float, and
    the row-level check would then blame the first row instead of the column."""
    import pyarrow.types as types

    def depth_and_leaf(arrow_type):
        depth = 0
        while types.is_list(arrow_type) or types.is_large_list(arrow_type) or types.is_fixed_size_list(arrow_type):
            arrow_type, depth = arrow_type.value_type, depth + 1
        return depth, arrow_type

    expected = {"prompt": (1, types.is_integer, "list of integers"),
                "responses": (2, types.is_integer, "list of lists of integers"),
                "rewards": (1, lambda t: types.is_integer(t) or types.is_floating(t), "list of numbers")}
    for name, (depth, leaf_ok, what) in expected.items():
        if name not in schema.names:
            raise ValueError(f"{path}: missing column {name!r} (columns: {schema.names})")
        arrow_type = schema.field(name).type
        found_depth, leaf = depth_and_leaf(arrow_type)
        # A column of nulls only (type null) passes here; its rows fail the record check.
        if not types.is_null(leaf) and (found_depth != depth or not leaf_ok(leaf)):
            raise ValueError(f"{path}: column {name!r}: expected a {what}, got {arrow_type}")


def group_from_record(record: object, vocab_size: int | None = None) -> RolloutGroup:
    """A RolloutGroup from a mapping with the fields prompt, responses and rewards (the form both
    file formats decode to); a ValueError names the field that breaks a rule. vocab_size: token
    ids must be below it."""
    if not isinstance(record, Mapping):
        raise ValueError(f"expected an object with the fields {FIELDS}, got {type(record).__name__}")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise ValueError(f"missing field {missing[0]!r}")
    responses = record["responses"]
    if not _is_list(responses):
        raise ValueError(f"responses: expected a list of lists of token ids, got {type(responses).__name__}")
    return RolloutGroup(
        _ids(record["prompt"], "prompt", vocab_size),
        tuple(_ids(r, f"responses[{i}]", vocab_size) for i, r in enumerate(responses)),
        _rewards(record["rewards"]),
    )


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


def _groups(path: str | Path, records: Iterator[tuple[str, object]], vocab_size: int | None) -> list[RolloutGroup]:
    """Every record as a RolloutGroup, an error prefixed with the record's place in the file."""
    groups = []
    for where, record in records:
        try:
            groups.append(group_from_record(record, vocab_size))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    if not groups:
        raise ValueError(f"{path}: no rollout group in the file")
    return groups


def _is_list(values: object) -> bool:
    return isinstance(values, Sequence) and not isinstance(values, (str, bytes))


def _ids(values: object, name: str, vocab_size: int | None) -> tuple[int, ...]:
    if not _is_list(values):
        raise ValueError(f"{name}: expected a list of token ids, got {type(values).__name__}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(f"{name}: token ids must be non-negative integers")
    outside = next((i for i, v in enumerate(values) if vocab_size is not None and v >= vocab_size), None)
    if outside is not None:
        raise ValueError(
            f"{name}[{outside}]: token id {values[outside]} is outside the model's vocabulary of {vocab_size} ids "
            f"(0..{vocab_size - 1})"
        )
    return tuple(values)


def _rewards(values: object) -> tuple[float, ...]:
    # Numbers only: a string or a bool is a malformed file, and a NaN or infinite reward would
    # turn its whole group's advantages into NaN.
    if not _is_list(values):
        raise ValueError(f"rewards: expected a list of numbers, got {type(values).__name__}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"rewards[{i}]: expected a finite number, got {v!r}")
    return tuple(float(v) for v in values)
