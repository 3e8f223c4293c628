"""dualkv.Layout: the packed shared-prompt layout (design section 2).

    [ prompt_0 | resp_0,0 | ... | resp_0,N0-1 | prompt_1 | resp_1,0 | ... ]

A layout is two int32 CPU tensors, what the C++ core validates and the operator takes:
cu_seqlens (S+1 offsets over all segments in packed order) and cu_groups (G+1 segment indices;
group g's first segment is its prompt, the rest its responses). Every Layout is valid: the
constructor runs the C++ validation (dualkv::Layout::from_offsets), whose errors surface as
ValueError naming the offending argument.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence

import torch

from . import _C

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _as_int32(value, name: str) -> int:
    """An int from a Python, numpy or tensor integer; bools and floats are rejected, not truncated.
    No length or offset can pass int32, and the C++ core cannot even receive one past int64, so
    such a value is named here."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None
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


class Layout:
    """The packed layout of G prompt groups; immutable.

    Build with `Layout.from_lengths(prompt_lengths, response_lengths)` or
    `Layout.from_offsets(cu_seqlens, cu_groups)`. `device` is where the per-token helpers
    (segment_ids, group_ids, position_ids) are created; the offsets themselves always stay on
    the CPU, where the operator reads them. Every tensor or list a property returns is a new copy,
    so writing to it cannot change the layout (whose derived values are cached). On CUDA the
    operator builds its work plans from these offset tensors on first use and keeps them while the
    tensors live, so passing one Layout to every layer of a micro-batch uploads each plan once.
    """

    def __init__(self, cu_seqlens, cu_groups, device: torch.device | str | None = None):
        # The offsets are private copies (`_offsets_tensor` never returns the caller's tensor).
        object.__setattr__(self, "_cu_seqlens", _offsets_tensor(cu_seqlens, "cu_seqlens"))
        object.__setattr__(self, "_cu_groups", _offsets_tensor(cu_groups, "cu_groups"))
        _C.validate_offsets(self._cu_seqlens, self._cu_groups)
        object.__setattr__(self, "_device", torch.device("cpu" if device is None else device))

    def __setattr__(self, name, value):
        raise AttributeError(f"Layout is immutable: cannot set {name!r}; build a new Layout instead")

    def __delattr__(self, name):
        raise AttributeError(f"Layout is immutable: cannot delete {name!r}")

    def __reduce__(self):
        # Rebuilt (and revalidated) from its offsets, without the cached helpers.
        return Layout, (self._cu_seqlens, self._cu_groups, self._device)

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
        cu_seqlens, cu_groups = _C.offsets_from_lengths(prompts, responses)
        return cls(cu_seqlens, cu_groups, device)

    @classmethod
    def from_offsets(cls, cu_seqlens, cu_groups, device: torch.device | str | None = None) -> Layout:
        """cu_seqlens: S+1 segment offsets; cu_groups: G+1 segment indices (tensors or sequences)."""
        return cls(cu_seqlens, cu_groups, device)

    def to(self, device: torch.device | str) -> Layout:
        """The same layout with its per-token helpers created on `device`."""
        return Layout(self._cu_seqlens, self._cu_groups, device)

    def _operator_offsets(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(cu_seqlens, cu_groups) themselves, not copies, for the operator calls of this package,
        which only read them."""
        return self._cu_seqlens, self._cu_groups

    @property
    def cu_seqlens(self) -> torch.Tensor:
        """(S+1,) int32 CPU segment offsets (a copy)."""
        return self._cu_seqlens.clone()

    @property
    def cu_groups(self) -> torch.Tensor:
        """(G+1,) int32 CPU indices of each group's first (prompt) segment (a copy)."""
        return self._cu_groups.clone()

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def num_groups(self) -> int:
        return self._cu_groups.numel() - 1

    @property
    def num_segments(self) -> int:
        return self._cu_seqlens.numel() - 1

    @property
    def num_tokens(self) -> int:
        return int(self._cu_seqlens[-1])

    @property
    def prompt_lengths(self) -> list[int]:
        """P_g per group."""
        return list(self._prompt_lengths)

    @property
    def response_lengths(self) -> list[list[int]]:
        """R_g,i per group, in packing order."""
        return [list(group) for group in self._response_lengths]

    @property
    def longest_path(self) -> int:
        """max over groups of P_g + max_i R_g,i: the most tokens one query's path holds, so the
        shortest attention window that changes nothing on this layout."""
        return self._longest_path

    @property
    def segment_ids(self) -> torch.Tensor:
        """(T,) int64: the segment (prompt or response, numbered in packed order) of each token."""
        return self._segment_ids.clone()

    @property
    def group_ids(self) -> torch.Tensor:
        """(T,) int64: the group of each token."""
        return self._group_ids.clone()

    @property
    def position_ids(self) -> torch.Tensor:
        """(T,) int64: prompt tokens 0..P_g-1; every response restarts at P_g (P_g..P_g+R-1),
        so each response sees the positions it has in its own [prompt; response] sequence."""
        return self._position_ids.clone()

    def _position_ids_on(self, device: torch.device) -> torch.Tensor:
        """The cached position ids on `device` (not a copy: for comparisons within the package)."""
        cache = self.__dict__.setdefault("_position_ids_by_device", {})
        if device not in cache:
            cache[device] = self._position_ids.to(device)
        return cache[device]

    @functools.cached_property
    def _segment_lengths(self) -> tuple[int, ...]:
        return tuple(self._cu_seqlens.diff().tolist())

    @functools.cached_property
    def _prompt_lengths(self) -> tuple[int, ...]:
        return tuple(self._segment_lengths[s] for s in self._cu_groups[:-1].tolist())

    @functools.cached_property
    def _response_lengths(self) -> tuple[tuple[int, ...], ...]:
        bounds = self._cu_groups.tolist()
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
        segments_per_group = self._cu_groups.diff().long()
        group_of_segment = torch.repeat_interleave(torch.arange(self.num_groups), segments_per_group)
        return group_of_segment.to(self._device)[self._segment_ids]

    @functools.cached_property
    def _position_ids(self) -> torch.Tensor:
        segments_per_group = self._cu_groups.diff().long()
        segment_start = self._cu_seqlens[:-1].long()
        prompt_length = self._cu_seqlens.diff().long()[self._cu_groups[:-1].long()]
        is_response = torch.ones(self.num_segments, dtype=torch.bool)
        is_response[self._cu_groups[:-1].long()] = False
        # A segment's first token has position 0 (prompt) or P_g (response).
        first_position = torch.repeat_interleave(prompt_length, segments_per_group) * is_response
        offset = (first_position - segment_start).to(self._device)
        return torch.arange(self.num_tokens, device=self._device) + offset[self._segment_ids]

    def __repr__(self) -> str:
        return (
            f"Layout(num_groups={self.num_groups}, num_tokens={self.num_tokens}, "
            f"prompt_lengths={self.prompt_lengths}, response_lengths={self.response_lengths})"
        )
