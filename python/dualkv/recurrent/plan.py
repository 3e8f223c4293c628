"""Where every segment of a packed stream starts its recurrence: the per-segment description that
the recurrent layers run from.

A recurrent layer (Gated DeltaNet, Mamba-2, KDA, ...) on a packed stream must give each token
exactly the state it would have if its own path ran alone. A path is a chain of segments: for the
shared-prompt layout, [prompt_g; response_i]; for a prefix tree, root ... leaf. So each segment s
is described by one number, `parents[s]`: the segment whose final recurrent state and
causal-convolution tail are s's initial ones, or -1 when s starts from zeros (a prompt, a root).
Everything else follows from it:

- Runs. A segment that is its parent's only child and comes right after it in packed order simply
  continues it: the two are one sequence of the recurrence, with no hand-off. Such chains are
  merged into runs (a group with a single response is one run, [prompt; response]; so is every row
  of an N-copy batch). A run starts from its first segment's parent's final state, which always
  ends that parent's run.
- Waves. A run can only start after its parent's run, so runs go in waves by depth: wave 0 holds
  every root run (all prompts), wave 1 every run whose parent is in wave 0 (all responses), and so
  on. Each wave is ONE varlen call of the recurrence over all of its runs; its initial states are
  the earlier waves' final states gathered by parent. The prompt/response layout has at most two
  waves, whatever the number of groups and responses; a tree has one per level of branching.
- Convolution tails. A causal convolution of width k reads, at a run's first token, the k - 1
  inputs before it on the path: the last tokens of its parent, of the grandparent when the parent
  is shorter than k - 1, and zeros before the root (as a single row would be zero-padded).

`RecurrentPlan.from_layout(layout)` gives the shared-prompt plan; a tree layout gives its own
`parents` to `RecurrentPlan(cu_seqlens, parents)`. Index tensors live on `device`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["RecurrentPlan", "Wave"]


@dataclass(frozen=True)
class Wave:
    """One varlen call of a recurrence: a run of consecutive rows of the wave-ordered stream.

    start, end: its rows [start, end) in the wave order (`RecurrentPlan.order`).
    cu_seqlens: (n+1,) int64 offsets of its n sequences (runs) within the wave, on the plan's
        device; cu_seqlens_cpu the same on the CPU (for kernels that plan on the host).
    state_source: (n,) int64 on the device, for each sequence the row of its parent's final state
        in the concatenation of the final states of earlier waves that produce them; None for
        wave 0, whose sequences all start from zeros.
    produces_states: whether any sequence of this wave ends in a parent (its final states are needed).
    """

    start: int
    end: int
    cu_seqlens: torch.Tensor
    cu_seqlens_cpu: torch.Tensor
    state_source: torch.Tensor | None
    produces_states: bool

    @property
    def num_sequences(self) -> int:
        return self.cu_seqlens_cpu.numel() - 1


class RecurrentPlan:
    """The recurrence schedule of a packed stream of S segments (see the module docstring).

    cu_seqlens: (S+1,) segment offsets in packed order; parents: (S,) parent segment of each
    segment (< its own index) or -1. Both are read on the host; `device` is where the index
    tensors are made.

    order: (T,) int64, packed row of each row of the wave-ordered stream (wave 0's runs in packed
        order, then wave 1's, ...); inverse_order: (T,) its inverse permutation; in_packed_order:
        whether that permutation is the identity (then no reordering is needed).
    waves: the waves in order.
    `conv_tail_index(width)`: the gather that gives every run its convolution tail.
    """

    def __init__(self, cu_seqlens, parents, device: torch.device | str = "cpu"):
        offsets = torch.as_tensor(cu_seqlens, dtype=torch.int64).cpu()
        parent = torch.as_tensor(parents, dtype=torch.int64).cpu()
        _check(offsets, parent)
        self.device = torch.device(device)
        self.num_tokens = int(offsets[-1])
        self.num_segments = parent.numel()
        self._offsets = offsets.tolist()
        self._parents = parent.tolist()
        self._runs, self._run_parents = _runs(self._parents)
        self._tails: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._build_waves()

    @classmethod
    def from_layout(cls, layout, device: torch.device | str = "cpu") -> RecurrentPlan:
        """The plan of a `dualkv.Layout`: every segment starts from its parent's final state (a
        response from its group's prompt's; in a tree, a turn from the turn before it)."""
        return cls(layout.cu_seqlens, layout.parents.tolist(), device)

    @property
    def parents(self) -> list[int]:
        return list(self._parents)

    @property
    def num_waves(self) -> int:
        return len(self.waves)

    @property
    def num_runs(self) -> int:
        return len(self._runs)

    def _run_rows(self, run: int) -> tuple[int, int]:
        first, last = self._runs[run]
        return self._offsets[first], self._offsets[last + 1]

    def _build_waves(self) -> None:
        depth = _depths(self._run_parents)
        runs_by_wave: list[list[int]] = [[] for _ in range(max(depth) + 1)]
        for run, d in enumerate(depth):
            runs_by_wave[d].append(run)
        is_parent = [False] * self.num_runs
        for parent in self._run_parents:
            if parent >= 0:
                is_parent[parent] = True
        # Final states exist only for waves with parents in them, concatenated in wave order.
        state_row: dict[int, int] = {}
        rows: list[torch.Tensor] = []
        waves: list[Wave] = []
        start = 0
        for runs in runs_by_wave:
            bounds = [self._run_rows(r) for r in runs]
            rows += [torch.arange(begin, end) for begin, end in bounds]
            cu = torch.tensor([0, *(end - begin for begin, end in bounds)]).cumsum(0)
            source = None
            if self._run_parents[runs[0]] >= 0:
                source = torch.tensor([state_row[self._run_parents[r]] for r in runs]).to(self.device)
            produces = any(is_parent[r] for r in runs)
            if produces:
                first = len(state_row)
                state_row.update({r: first + i for i, r in enumerate(runs)})
            waves.append(Wave(start, start + int(cu[-1]), cu.to(self.device), cu, source, produces))
            start += int(cu[-1])
        order = torch.cat(rows)
        self.in_packed_order = bool(torch.equal(order, torch.arange(self.num_tokens)))
        self.order = order.to(self.device)
        self.inverse_order = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel())).to(self.device)
        self.waves = tuple(waves)

    def conv_tail_index(self, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The gather of a causal convolution of `width` taps with per-run tails.

        Returns (source, output_rows): source (T + R (width-1),) int64, R the number of runs,
        indexes the packed input with one zero row appended at index T; gathering it gives, run by
        run in packed order, the width-1 inputs before the run on its path (zero rows before the
        root) and then the run's own rows. A valid (unpadded) convolution over that gathered
        stream gives every packed row's output at output_rows (T,) int64, exactly what the row's
        own path zero-padded on the left would give.
        """
        if width < 1:
            raise ValueError(f"width: a convolution has at least one tap, got {width}")
        if width not in self._tails:
            self._tails[width] = tuple(t.to(self.device) for t in self._conv_tail_index(width - 1))
        return self._tails[width]

    def _conv_tail_index(self, tail: int) -> tuple[torch.Tensor, torch.Tensor]:
        zero_row = self.num_tokens
        pieces, run_lengths = [], []
        for run, (first, _) in enumerate(self._runs):
            before: list[int] = []
            ancestor = self._parents[first]
            while len(before) < tail and ancestor >= 0:
                begin, end = self._offsets[ancestor], self._offsets[ancestor + 1]
                before = list(range(max(begin, end - (tail - len(before))), end)) + before
                ancestor = self._parents[ancestor]
            before = [zero_row] * (tail - len(before)) + before
            begin, end = self._run_rows(run)
            pieces += [torch.tensor(before, dtype=torch.int64), torch.arange(begin, end)]
            run_lengths.append(end - begin)
        source = torch.cat(pieces)
        # Row t of run r sits at t + (r + 1) * tail in the gathered stream; the valid
        # convolution's output j ends at input j + tail, so row t's output is at t + r * tail.
        run_of_row = torch.repeat_interleave(torch.arange(self.num_runs), torch.tensor(run_lengths))
        output_rows = torch.arange(self.num_tokens) + run_of_row * tail
        return source, output_rows

    def __repr__(self) -> str:
        return (
            f"RecurrentPlan(num_segments={self.num_segments}, num_runs={self.num_runs}, "
            f"num_tokens={self.num_tokens}, num_waves={self.num_waves})"
        )


def _check(offsets: torch.Tensor, parents: torch.Tensor) -> None:
    if offsets.dim() != 1 or offsets.numel() < 2 or int(offsets[0]) != 0:
        raise ValueError("cu_seqlens: expected S+1 >= 2 offsets starting at 0")
    if bool((offsets.diff() < 1).any()):
        raise ValueError("cu_seqlens: every segment must hold at least one token (offsets strictly increasing)")
    if parents.dim() != 1 or parents.numel() != offsets.numel() - 1:
        raise ValueError(
            f"parents: expected one entry per segment ({offsets.numel() - 1}), got shape {tuple(parents.shape)}"
        )
    index = torch.arange(parents.numel())
    bad = ((parents < -1) | (parents >= index)).nonzero()
    if bad.numel():
        s = int(bad[0])
        raise ValueError(f"parents[{s}]: must be -1 or the index of an earlier segment (< {s}), got {int(parents[s])}")


def _runs(parents: list[int]) -> tuple[list[tuple[int, int]], list[int]]:
    """Segments merged into runs (first, last segment), in packed order, and each run's parent run
    (-1 for a root): segment s continues its parent's run when it is the parent's only child and
    comes right after it."""
    children = [0] * len(parents)
    for parent in parents:
        if parent >= 0:
            children[parent] += 1
    runs: list[tuple[int, int]] = []
    run_parents: list[int] = []
    run_of: list[int] = []
    for segment, parent in enumerate(parents):
        if parent >= 0 and parent == segment - 1 and children[parent] == 1:
            runs[-1] = (runs[-1][0], segment)
        else:
            runs.append((segment, segment))
            run_parents.append(-1 if parent < 0 else run_of[parent])
        run_of.append(len(runs) - 1)
    return runs, run_parents


def _depths(parents: list[int]) -> list[int]:
    depth: list[int] = []
    for parent in parents:  # parents come first, so their depth is known
        depth.append(0 if parent < 0 else depth[parent] + 1)
    return depth
