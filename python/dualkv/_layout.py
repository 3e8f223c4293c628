"""dualkv.Layout: the packed layout, a forest of segments in packed order (include/dualkv/layout.h
states its rules).

Tree layouts (multi-turn and branching rollouts): `parents[s]` is segment s's parent (< s) or -1
for a root; a query in segment s sees the earlier tokens of s and every token of every ancestor
of s, and position ids continue along the path. Two-level layouts (GRPO/DAPO groups) are the
depth-2 case:

    [ prompt_0 | resp_0,0 | ... | resp_0,N0-1 | prompt_1 | resp_1,0 | ... ]

A layout is two int32 CPU tensors, what the C++ core validates and the operator takes:
cu_seqlens (S+1 offsets over all segments in packed order) and parents (S segment indices).
Two-level layouts also have cu_groups (G+1 segment indices; group g's first segment is its
prompt, the rest its responses) and the group API. Every Layout is valid: the constructor runs
the C++ validation (dualkv::Layout::from_tree_offsets), whose errors surface as ValueError naming
the offending argument.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence

import torch

from . import _C

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _as_int(value, name: str) -> int:
    """An int from a Python, numpy or tensor integer; bools and floats are rejected, not truncated."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None


def _as_int32(value, name: str) -> int:
    """_as_int for a length or offset: none can pass int32, and the C++ core cannot even receive
    one past int64, so such a value is named here."""
    result = _as_int(value, name)
    if not _INT32_MIN <= result <= _INT32_MAX:
        raise ValueError(f"{name}: must fit in int32 (token counts and offsets are int32), got {result}")
    return result


def _as_sequence(value, name: str) -> Sequence:
    """A list or tuple as it is; a tensor or numpy array of >= 1 dimensions as a list of its rows."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return value
    if isinstance(value, torch.Tensor) or hasattr(value, "__array__"):
        if getattr(value, "ndim", 0) >= 1:
            return list(value)
        raise TypeError(f"{name}: expected a sequence, got a 0-dimensional {type(value).__name__}")
    raise TypeError(f"{name}: expected a sequence, got {type(value).__name__}")


@torch.inference_mode(False)
def _offsets_tensor(value, name: str) -> torch.Tensor:
    """A 1-D int32 CPU tensor from a tensor or a sequence of ints, without silent wrap-around;
    always a new tensor, never the caller's. Never an inference tensor either: a layout built
    under torch.inference_mode (during rollouts, say) must serve training, where autograd saves
    the offsets for the backward pass."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{name}: expected an integer tensor, got dtype {value.dtype}")
        if value.dim() != 1:
            raise ValueError(f"{name}: expected a 1-D tensor, got {value.dim()} dimensions")
        if value.device.type == "meta":
            raise ValueError(f"{name}: a tensor on the meta device holds no values; pass the offsets themselves")
        values = value.detach().to("cpu", torch.int64)
        outside = ((values < _INT32_MIN) | (values > _INT32_MAX)).nonzero()
        if outside.numel():
            index = int(outside[0])
            raise ValueError(
                f"{name}[{index}]: must fit in int32 (token counts and offsets are int32), got {int(values[index])}"
            )
        return values.to(torch.int32)
    entries = [_as_int32(v, f"{name}[{i}]") for i, v in enumerate(_as_sequence(value, name))]
    return torch.tensor(entries, dtype=torch.int32)


def _as_segment_index(value, name: str) -> int:
    """_as_int for a parent index. The C++ core checks the range (it receives int64, so a value
    past it is named here)."""
    result = _as_int(value, name)
    if not -(2**63) <= result < 2**63:
        raise ValueError(f"{name}: must be -1 (a root) or the index of an earlier segment, got {result}")
    return result


class Layout:
    """The packed layout of a forest of segments; immutable.

    Build with `Layout.from_tree(parents, lengths)`, or for two-level (prompt group) layouts
    `Layout.from_lengths(prompt_lengths, response_lengths)` or `Layout.from_offsets(cu_seqlens,
    cu_groups)`. `device` is where the per-token helpers (segment_ids, group_ids, position_ids)
    are created; the layout tensors themselves always stay on the CPU, where the operator reads
    them. Every tensor or list a property returns is a new copy, so writing to it cannot change
    the layout (whose derived values are cached). On CUDA the operator builds its work plans from
    these tensors on first use and keeps them while the tensors live, so passing one Layout to
    every layer of a micro-batch uploads each plan once.
    """

    def __init__(self, cu_seqlens, parents, device: torch.device | str | None = None):
        # The tensors are private copies (`_offsets_tensor` never returns the caller's tensor).
        object.__setattr__(self, "_cu_seqlens", _offsets_tensor(cu_seqlens, "cu_seqlens"))
        object.__setattr__(self, "_parents", _offsets_tensor(parents, "parents"))
        cu_groups, position_begins, depth = _C.describe_layout(self._cu_seqlens, self._parents)
        object.__setattr__(self, "_cu_groups", cu_groups)
        object.__setattr__(self, "_position_begins", position_begins)
        object.__setattr__(self, "_depth", depth)
        object.__setattr__(self, "_device", torch.device("cpu" if device is None else device))

    def __setattr__(self, name, value):
        raise AttributeError(f"Layout is immutable: cannot set {name!r}; build a new Layout instead")

    def __delattr__(self, name):
        raise AttributeError(f"Layout is immutable: cannot delete {name!r}")

    def __reduce__(self):
        # Rebuilt (and revalidated) from its tensors, without the cached helpers.
        return Layout, (self._cu_seqlens, self._parents, self._device)

    @classmethod
    def from_lengths(cls, prompt_lengths, response_lengths, device: torch.device | str | None = None) -> Layout:
        """prompt_lengths: G ints (P_g >= 1); response_lengths: G sequences of ints (N_g >= 1
        responses, each R >= 1). Lists, tuples, tensors and numpy arrays all work. Groups are
        packed in order, each prompt followed by its responses."""
        prompts = [
            _as_int32(p, f"prompt_lengths[{g}]") for g, p in enumerate(_as_sequence(prompt_lengths, "prompt_lengths"))
        ]
        responses = [
            [
                _as_int32(r, f"response_lengths[{g}][{i}]")
                for i, r in enumerate(_as_sequence(group, f"response_lengths[{g}]"))
            ]
            for g, group in enumerate(_as_sequence(response_lengths, "response_lengths"))
        ]
        return cls(*_C.layout_from_lengths(prompts, responses), device)

    @classmethod
    def from_offsets(cls, cu_seqlens, cu_groups, device: torch.device | str | None = None) -> Layout:
        """cu_seqlens: S+1 segment offsets; cu_groups: G+1 segment indices (tensors or sequences)."""
        return cls(
            *_C.layout_from_offsets(_offsets_tensor(cu_seqlens, "cu_seqlens"), _offsets_tensor(cu_groups, "cu_groups")),
            device,
        )

    @classmethod
    def from_tree(cls, parents, lengths, device: torch.device | str | None = None) -> Layout:
        """A tree layout: segments in packed order, parents[s] the index of segment s's parent
        (< s) or -1 for a root, lengths[s] >= 1 its tokens (sequences, tensors or numpy arrays)."""
        parent_list = [_as_segment_index(p, f"parents[{s}]") for s, p in enumerate(_as_sequence(parents, "parents"))]
        length_list = [_as_int32(n, f"lengths[{s}]") for s, n in enumerate(_as_sequence(lengths, "lengths"))]
        return cls(*_C.layout_from_tree(parent_list, length_list), device)

    def to(self, device: torch.device | str) -> Layout:
        """The same layout with its per-token helpers created on `device`."""
        return Layout(self._cu_seqlens, self._parents, device)

    def _operator_offsets(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(cu_seqlens, parents) themselves, not copies, for the operator calls of this package,
        which only read them."""
        return self._cu_seqlens, self._parents

    @property
    def cu_seqlens(self) -> torch.Tensor:
        """(S+1,) int32 CPU segment offsets (a copy)."""
        return self._cu_seqlens.clone()

    @property
    def parents(self) -> torch.Tensor:
        """(S,) int32 CPU: each segment's parent, -1 for a root (a copy)."""
        return self._parents.clone()

    @property
    def is_two_level(self) -> bool:
        """Whether every root is followed by its children, all leaves, at least one: a layout of
        prompt groups, with cu_groups and the group API."""
        return self._cu_groups is not None

    @property
    def cu_groups(self) -> torch.Tensor:
        """(G+1,) int32 CPU indices of each group's first (prompt) segment (a copy); two-level
        layouts only."""
        return self._groups().clone()

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def num_groups(self) -> int:
        """Prompt groups; two-level layouts only."""
        return self._groups().numel() - 1

    @property
    def num_segments(self) -> int:
        return self._cu_seqlens.numel() - 1

    @property
    def num_tokens(self) -> int:
        return int(self._cu_seqlens[-1])

    @property
    def depth(self) -> int:
        """Segments on the longest root-to-leaf path (2 for a two-level layout)."""
        return self._depth

    @property
    def segment_lengths(self) -> list[int]:
        """Tokens of each segment, in packed order."""
        return list(self._segment_lengths)

    @property
    def prompt_lengths(self) -> list[int]:
        """P_g per group; two-level layouts only."""
        return list(self._prompt_lengths)

    @property
    def response_lengths(self) -> list[list[int]]:
        """R_g,i per group, in packing order; two-level layouts only."""
        return [list(group) for group in self._response_lengths]

    @property
    def longest_path(self) -> int:
        """max over groups of P_g + max_i R_g,i: the most tokens one query's path holds, so the
        shortest attention window that changes nothing on this layout."""
        return self._longest_path

    @property
    def segment_ids(self) -> torch.Tensor:
        """(T,) int64: the segment of each token (numbered in packed order)."""
        return self._segment_ids.clone()

    @property
    def group_ids(self) -> torch.Tensor:
        """(T,) int64: the group of each token; two-level layouts only."""
        return self._group_ids.clone()

    @property
    def position_ids(self) -> torch.Tensor:
        """(T,) int64: positions along each token's root-to-segment path (a segment starts at the
        total length of its ancestors), the positions it has in its own path run alone. Two-level:
        prompt tokens 0..P_g-1, every response restarting at P_g."""
        return self._position_ids.clone()

    def _position_ids_on(self, device: torch.device) -> torch.Tensor:
        """The cached position ids on `device` (not a copy: for comparisons within the package)."""
        cache = self.__dict__.setdefault("_position_ids_by_device", {})
        if device not in cache:
            cache[device] = self._position_ids.to(device)
        return cache[device]

    def _groups(self) -> torch.Tensor:
        if self._cu_groups is None:
            raise ValueError(
                f"layout: a tree of depth {self._depth} that is not two-level (every root followed by its "
                "children, all leaves) has no prompt groups; use parents, segment_lengths and position_ids"
            )
        return self._cu_groups

    @functools.cached_property
    def _segment_lengths(self) -> tuple[int, ...]:
        return tuple(self._cu_seqlens.diff().tolist())

    @functools.cached_property
    def _prompt_lengths(self) -> tuple[int, ...]:
        return tuple(self._segment_lengths[s] for s in self._groups()[:-1].tolist())

    @functools.cached_property
    def _response_lengths(self) -> tuple[tuple[int, ...], ...]:
        bounds = self._groups().tolist()
        return tuple(self._segment_lengths[first + 1 : end] for first, end in itertools.pairwise(bounds))

    @functools.cached_property
    def _longest_path(self) -> int:
        return max(p + max(r) for p, r in zip(self._prompt_lengths, self._response_lengths))

    @functools.cached_property
    def _segment_ids(self) -> torch.Tensor:
        lengths = self._cu_seqlens.diff().long()
        return torch.repeat_interleave(torch.arange(self.num_segments), lengths).to(self._device)

    @functools.cached_property
    def _group_ids(self) -> torch.Tensor:
        segments_per_group = self._groups().diff().long()
        group_of_segment = torch.repeat_interleave(torch.arange(self.num_groups), segments_per_group)
        return group_of_segment.to(self._device)[self._segment_ids]

    @functools.cached_property
    def _position_ids(self) -> torch.Tensor:
        # A segment's first token has the position its ancestors' total length gives it.
        offset = (self._position_begins.long() - self._cu_seqlens[:-1].long()).to(self._device)
        return torch.arange(self.num_tokens, device=self._device) + offset[self._segment_ids]

    def __repr__(self) -> str:
        if self.is_two_level:
            return (
                f"Layout(num_groups={self.num_groups}, num_tokens={self.num_tokens}, "
                f"prompt_lengths={self.prompt_lengths}, response_lengths={self.response_lengths})"
            )
        return (
            f"Layout(num_segments={self.num_segments}, num_tokens={self.num_tokens}, depth={self.depth}, "
            f"parents={self._parents.tolist()}, segment_lengths={self.segment_lengths})"
        )
