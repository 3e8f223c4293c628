"""Which models dualkv runs exactly: a behavioural check of every layer that mixes tokens.

A packed batch equals the N-copy batch iff every output row depends only on the rows the layout
lets it see (its group's prompt up to itself if it is a prompt row; the whole prompt and its own
response up to itself if it is a response row). Attention through transformers' interface with
attn_implementation "dualkv" keeps to that, since it receives `dualkv_layout`; per-token layers
(norms, projections, MLPs, MoE experts, RoPE) trivially do. Any other layer that mixes tokens (a
recurrent or convolution layer, an attention that computes its own scores, a cumulative sum) runs
over the whole packed stream as if it were one sequence, and later responses come out wrong.

`check_token_mixing(model)` decides by what the model does, never by class names, so a class it has
never seen is judged like a known one, and a layer adapted to read the layout passes because it
behaves correctly:

1. A probe batch (two groups, ragged responses, PROBE_TOKENS tokens) runs through the model once,
   with the output of the input embeddings as a leaf of the autograd graph.
2. For each packed row t, the gradient of a random projection of the model's output row t with
   respect to every embedding row. Every row the layout hides from t (another response, another
   group, a later token) must get exactly zero. A model that keeps the segments apart has no
   autograd path from those rows, so their gradient is an exact zero whatever order its sums run
   in (masked softmax probabilities are exact zeros too); one that mixes them gives a nonzero or
   NaN gradient. Gradients rather than perturbed forward passes: perturbing a token can move it to
   another MoE expert, which changes the row count of every expert's matmul, and with it the last
   bits of other rows (CPU BLAS and cuBLAS pick kernels by shape).
3. If a row leaks, the model runs once more with every module's inputs recorded, each module is
   re-run alone on them under the same gradient test (top-down, into the modules that leak), and
   the error names the deepest modules that leak, with their paths.

The probe runs in eval mode (no dropout, no activation checkpointing), with the caller's random
number generators left as they were. A dependence that carries no gradient (a discrete choice that
depends on other tokens, as capacity-limited MoE routing would be) is invisible to the test; no
transformers causal LM routes that way, and `scripts/model_sweep.py` compares every architecture
numerically against its N-copy batch.

Cost: one forward pass and PROBE_TOKENS backward passes on PROBE_TOKENS tokens, on the model's own
device and dtype; each model instance is checked once. DUALKV_MODEL_CHECK=0 skips the check.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import os
import weakref
from collections.abc import Callable, Iterator

import torch

from ._layout import Layout

__all__ = [
    "MODEL_CHECK_VARIABLE",
    "LayoutNotReceivedError",
    "UnsupportedModelError",
    "check_token_mixing",
    "guard_first_packed_forward",
    "is_checked",
    "is_dualkv_attention",
    "mark_token_mixing_checked",
    "positions_unchecked",
    "probing",
]

MODEL_CHECK_VARIABLE = "DUALKV_MODEL_CHECK"
# dualkv's attention implementations in transformers: the packed-only one, and the trainer
# integrations' dispatching "dualkv_or_<fallback>".
ATTENTION_NAME = "dualkv"
DISPATCH_PREFIX = "dualkv_or_"
# Two groups with ragged responses, a one-token prompt and a one-token response. 11 tokens: a
# prime that no model dimension is likely to equal, so that a tensor's token axis is the one axis
# of that size.
PROBE_PROMPT_LENGTHS = (3, 1)
PROBE_RESPONSE_LENGTHS = ((2, 1), (1, 3))
PROBE_TOKENS = sum(PROBE_PROMPT_LENGTHS) + sum(map(sum, PROBE_RESPONSE_LENGTHS))
_SEED = 20261129
_LISTED_PATHS = 3  # paths named per layer class; the rest are counted
_THIS_FILE = os.path.realpath(__file__)
_PACKAGE_DIRECTORY = os.path.dirname(_THIS_FILE) + os.sep

SUPPORTED = (
    "dualkv runs layers that mix tokens only through transformers' attention interface (attention "
    "layers that pass the model call's keyword arguments, dualkv_layout among them, to the 'dualkv' "
    "attention function), and layers that read dualkv_layout themselves and keep its segments apart; "
    "see docs/models.md"
)


class UnsupportedModelError(ValueError):
    """The model mixes tokens in a way dualkv cannot run exactly on the packed layout."""


class LayoutNotReceivedError(ValueError):
    """An attention layer was called without dualkv_layout; `module` is that layer."""

    def __init__(self, message: str, module: torch.nn.Module):
        super().__init__(message)
        self.module = module


# Models (and the transformers sub-models inside them) whose check passed.
_checked: weakref.WeakSet = weakref.WeakSet()
_probing = contextvars.ContextVar("dualkv_probing", default=False)
_positions_unchecked = contextvars.ContextVar("dualkv_positions_unchecked", default=False)


def is_dualkv_attention(name) -> bool:
    return isinstance(name, str) and (name == ATTENTION_NAME or name.startswith(DISPATCH_PREFIX))


def probing() -> bool:
    """True while a check's probe runs (the model's own first-forward check must not recurse)."""
    return _probing.get()


def positions_unchecked() -> bool:
    """True while the probe runs a model without position ids, to see which it uses by default."""
    return _positions_unchecked.get()


def is_checked(model: torch.nn.Module) -> bool:
    return model in _checked


def check_token_mixing(model: torch.nn.Module) -> None:
    """Raises UnsupportedModelError unless every layer of `model` that mixes tokens keeps to the
    packed layout (see the module docstring). `model`: a transformers model whose attention
    implementation is "dualkv" or dispatches packed calls to it, not sharded (run the check before
    FSDP's fully_shard), with real (not meta) parameters. Checked once per model instance."""
    if model in _checked or os.environ.get(MODEL_CHECK_VARIABLE, "1") == "0":
        _release_guards(model)
        return
    _check_probe_can_run(model)
    with torch.inference_mode(False):  # the probe's own tensors, the layout's among them, take part in autograd
        probe = _Probe(model)
        leaks = probe.model_leaks()
        if leaks:
            raise UnsupportedModelError(probe.describe(leaks))
        if not probe.numbers_positions_from_zero():
            raise UnsupportedModelError(
                f"{type(model).__name__}: on a sequence of its own it does not number positions 0..L-1 (its output "
                "without position_ids differs from its output with position_ids 0..L-1), so the position ids of a "
                "packed batch (prompt 0..P-1, each response from P) are not those of its N-copy rows. "
                f"{SUPPORTED}."
            )
    mark_token_mixing_checked(model)  # the transformers models inside it too


def mark_token_mixing_checked(model: torch.nn.Module) -> None:
    """Records `model` as checked without running the probe: for a copy that cannot run it (meta
    parameters) of a model another process checks, such as veRL's ranks other than 0, which load
    the weights later. Skipping the check on a model that was never checked gives up the guarantee."""
    for module in model.modules():
        if hasattr(module, "get_input_embeddings"):
            _checked.add(module)
    _checked.add(model)
    _release_guards(model)


def guard_first_packed_forward(model: torch.nn.Module) -> None:
    """Makes `model` run `check_token_mixing` before its first call that carries a packed batch
    (a dualkv_layout or dualkv_packed keyword argument). Idempotent; the guard goes once the
    model passed."""
    if _check_before_packed_forward not in model._forward_pre_hooks.values():
        model.register_forward_pre_hook(_check_before_packed_forward, with_kwargs=True)


# Outside any compiled region: under torch.compile the check still runs, eagerly, once (and a
# compiled model is recompiled once without the guard). Its name is what torch.compile(fullgraph=True)
# reports: check the model first (check_token_mixing) to compile it whole.
@torch.compiler.disable
def _check_before_packed_forward(model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    if kwargs.get("dualkv_layout") is None and kwargs.get("dualkv_packed") is None:
        return
    # The model's attention may have been switched away from dualkv's since (a benchmark's other
    # attention function reading the same keyword): the check is about dualkv's.
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if is_dualkv_attention(implementation) and not probing():
        check_token_mixing(model)  # which releases the guard once the model passed


def _release_guards(model: torch.nn.Module) -> None:
    for module in model.modules():
        hooks = module._forward_pre_hooks
        for key in [key for key, hook in hooks.items() if hook is _check_before_packed_forward]:
            del hooks[key]
            module._forward_pre_hooks_with_kwargs.pop(key, None)


def _check_probe_can_run(model: torch.nn.Module) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    name = type(model).__name__
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.is_meta:
            raise ValueError(
                f"model: {name} has parameters on the meta device, which hold no values to run; check it once its "
                f"weights are loaded ({MODEL_CHECK_VARIABLE}=0 skips the check)"
            )
        if _is_dtensor(tensor):
            raise ValueError(
                f"model: {name} is sharded (DTensor parameters, e.g. FSDP2's fully_shard); run "
                "dualkv.transformers.check_token_mixing(model) before sharding it (PackedPolicy and the TRL and veRL "
                f"integrations do), or set {MODEL_CHECK_VARIABLE}=0 to skip the check"
            )


def _is_dtensor(tensor: torch.Tensor) -> bool:
    if not torch.distributed.is_available():
        return False
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


class _Probe:
    """The probe batch and the gradient test, for a whole model or one of its modules."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.embeddings = _input_embeddings(model)
        self.device = next(iter((*model.parameters(), *model.buffers())), torch.empty(0)).device
        self.layout = Layout.from_lengths(PROBE_PROMPT_LENGTHS, PROBE_RESPONSE_LENGTHS)
        self.visible = _visibility(self.layout)
        generator = torch.Generator().manual_seed(_SEED)
        config = getattr(model, "config", None)
        vocab = getattr(self.embeddings, "num_embeddings", None) or getattr(config, "vocab_size", 2)
        # Ids from 1: 0 is often the padding id.
        self.input_ids = torch.randint(1, max(vocab, 2), (1, PROBE_TOKENS), generator=generator).to(self.device)
        self.position_ids = self.layout.position_ids[None].to(self.device)
        self.weights_generator = generator

    # --- running the model ---------------------------------------------------------------------
    @contextlib.contextmanager
    def _context(self):
        """Eval mode (dropout off, no activation checkpointing: reentrant checkpointing refuses
        torch.autograd.grad), gradients on, the caller's RNG state restored afterwards, and for a
        model whose attention dispatches ("dualkv_or_..."), a packed forward."""
        modes = [(module, module.training) for module in self.model.modules()]
        devices = [self.device.index if self.device.index is not None else torch.cuda.current_device()] if (
            self.device.type == "cuda"
        ) else []
        token = _probing.set(True)
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(torch.random.fork_rng(devices=devices))
                stack.enter_context(torch.inference_mode(False))
                stack.enter_context(torch.enable_grad())
                stack.enter_context(_packed_forward_if_dispatching(self.model))
                self.model.eval()
                yield
        finally:
            _probing.reset(token)
            for module, training in modes:
                module.training = training

    def _call(self, call: Callable[[], object]):
        """Runs one probe call; an error from outside dualkv becomes a refusal naming the model."""
        try:
            return call()
        except LayoutNotReceivedError as error:
            raise UnsupportedModelError(self._describe_missing_layout(error.module)) from error
        except Exception as error:
            if _raised_by_dualkv(error):
                raise
            raise UnsupportedModelError(
                f"{type(self.model).__name__}: its forward pass fails on a packed batch ({type(error).__name__}: "
                f"{error}), so dualkv cannot run it (with dualkv no attention mask is built, since the layout is the "
                f"mask: a model whose own code reads the mask fails like this). {SUPPORTED}."
            ) from error

    def _model_inputs(self) -> dict:
        return {
            "input_ids": self.input_ids,
            "position_ids": self.position_ids,
            "dualkv_layout": self.layout,
            "use_cache": False,
        }

    def model_leaks(self) -> list[tuple[int, int]]:
        """(t, u) pairs: output row t has a nonzero gradient at an embedding row u it must not see."""
        name = type(self.model).__name__

        def run():
            with self._embeddings_as_leaves() as leaves:
                output = self._call(lambda: self.model(**self._model_inputs()))
            rows = _model_output(output, name, PROBE_TOKENS)
            if not bool(torch.isfinite(rows).all()):
                raise UnsupportedModelError(
                    f"{name}: its output on dualkv's probe batch is not finite, so dualkv cannot check how it mixes "
                    f"tokens ({MODEL_CHECK_VARIABLE}=0 skips the check)"
                )
            if not leaves:
                raise UnsupportedModelError(
                    f"{name}: its input embeddings ({type(self.embeddings).__name__}) were not called on the probe "
                    "batch, so dualkv cannot check how it mixes tokens"
                )
            return [(rows, 1)], leaves

        with self._context():
            self._check_rows_reach_themselves(run)
            return self._leaking_pairs(run)

    def numbers_positions_from_zero(self) -> bool:
        """Whether the model, given one sequence and no position ids, computes exactly what it
        computes given position_ids 0..L-1: what dualkv's position ids assume of the N-copy rows
        (a model that counts from its padding id, as RoBERTa's embeddings do, does not). Both calls
        have the same shapes and values, so the comparison is bitwise. The attention layers' own
        check of the position ids is off for the call without them."""
        length = PROBE_PROMPT_LENGTHS[0] + PROBE_RESPONSE_LENGTHS[0][0]
        path = Layout.from_lengths([PROBE_PROMPT_LENGTHS[0]], [[PROBE_RESPONSE_LENGTHS[0][0]]])
        inputs = {"input_ids": self.input_ids[:, :length], "dualkv_layout": path, "use_cache": False}
        name = type(self.model).__name__
        token = _positions_unchecked.set(True)
        try:
            with self._context(), torch.no_grad():
                given = self._call(lambda: self.model(**inputs, position_ids=path.position_ids[None].to(self.device)))
                default = self._call(lambda: self.model(**inputs))
        finally:
            _positions_unchecked.reset(token)
        return torch.equal(_model_output(given, name, length), _model_output(default, name, length))

    def _check_rows_reach_themselves(self, run) -> None:
        """Every row depends on its own token: otherwise the test could not see any dependence
        (no gradient reaches the embeddings), and passing it would mean nothing."""
        [(rows, _)], [(leaf, axis)] = run()
        weights = torch.randn(rows.shape[-1], generator=self.weights_generator).to(rows.device)
        total = (rows[0, -1].float() * weights).sum()
        (grad,) = torch.autograd.grad(total, [leaf], allow_unused=True) if rows.requires_grad else (None,)
        if grad is None or not bool((grad.movedim(axis, 0)[-1] != 0).any()):
            raise UnsupportedModelError(
                f"{type(self.model).__name__}: no gradient reaches its input embeddings from its output, so dualkv "
                f"cannot check how it mixes tokens ({MODEL_CHECK_VARIABLE}=0 skips the check)"
            )

    @contextlib.contextmanager
    def _embeddings_as_leaves(self) -> Iterator[list]:
        """The input embeddings' first output on the probe tokens becomes a leaf that requires
        grad (a clone of it flows on, so that in-place changes downstream are allowed)."""
        leaves: list[tuple[torch.Tensor, int]] = []

        def hook(module, args, output):
            if leaves or not isinstance(output, torch.Tensor) or _token_axis(output) is None:
                return None
            leaf = output.detach().requires_grad_()
            leaves.append((leaf, _token_axis(output)))
            return leaf.clone()

        handle = self.embeddings.register_forward_hook(hook)
        try:
            yield leaves
        finally:
            handle.remove()

    def _leaking_pairs(self, run, rows=range(PROBE_TOKENS), first_only=False) -> list[tuple[int, int]]:
        """The gradient test of output `rows`. run() runs the model or module afresh and returns
        its outputs and its leaves as (tensor, token axis) pairs: one graph per backward pass, since
        a compiled region (torch.compile's donated buffers) refuses a second backward through its
        graph. first_only: stop at the first row that leaks."""
        pairs = []
        for t in rows:
            if pairs and first_only:
                break
            outputs, leaves = run()
            outputs = [(tensor, axis) for tensor, axis in outputs if tensor.requires_grad]
            if not outputs or not leaves:
                break
            total = sum(
                (row.float() * torch.randn(row.shape, generator=self.weights_generator).to(row.device)).sum()
                for row in (tensor.select(axis, t) for tensor, axis in outputs)
            )
            grads = torch.autograd.grad(total, [leaf for leaf, _ in leaves], allow_unused=True)
            hidden = ~self.visible[t]
            for (_, axis), grad in zip(leaves, grads):
                if grad is None:
                    continue
                by_row = grad.movedim(axis, 0).reshape(PROBE_TOKENS, -1).cpu()
                reached = (by_row != 0).any(dim=1) & hidden  # NaN != 0 too
                pairs += [(t, int(u)) for u in reached.nonzero()[:, 0]]
        return sorted(set(pairs))

    # --- finding the layers that leak ----------------------------------------------------------
    def describe(self, leaks: list[tuple[int, int]]) -> str:
        # A module whose output row t reads a hidden row makes the model's row t read it too (its
        # output reaches row t of the residual stream), so only the rows that leak in the whole
        # model need testing in its modules.
        self.leaking_rows = sorted({t for t, _ in leaks})
        culprits = self._culprits()
        by_class: dict[str, list[str]] = {}
        for path in culprits:
            module = self.model.get_submodule(path)
            by_class.setdefault(type(module).__name__, []).append(path or "(the model's own forward)")
        lines = []
        for name, paths in by_class.items():
            more = f" and {len(paths) - _LISTED_PATHS} more" if len(paths) > _LISTED_PATHS else ""
            lines.append(f"  {name} at {', '.join(paths[:_LISTED_PATHS])}{more}")
        t, u = leaks[0]
        return (
            f"{type(self.model).__name__}: dualkv cannot run this model exactly on the packed layout. These layers mix "
            "tokens across the segments of a packed batch (an output row depends on a row the layout hides from it: "
            "another response, another group or a later token), so responses after a group's first would not equal "
            f"their N-copy rows:\n" + "\n".join(lines) + "\n"
            f"(on dualkv's probe batch, packed token {t} ({self._row(t)}) depends on packed token {u} "
            f"({self._row(u)}).)\n"
            f"{SUPPORTED}."
        )

    def _row(self, token: int) -> str:
        offsets = self.layout.cu_seqlens.tolist()
        segment = max(s for s in range(len(offsets) - 1) if offsets[s] <= token)
        firsts = self.layout.cu_groups.tolist()
        group = max(g for g in range(len(firsts) - 1) if firsts[g] <= segment)
        part = "prompt" if segment == firsts[group] else f"response {segment - firsts[group] - 1}"
        return f"group {group}, {part}, token {token - offsets[segment]}"

    def _describe_missing_layout(self, module: torch.nn.Module) -> str:
        path = next((name for name, m in self.model.named_modules() if m is module), "?")
        parent = self.model.get_submodule(path.rpartition(".")[0]) if path != "?" else self.model
        return (
            f"{type(self.model).__name__}: {type(module).__name__} at {path} is called without the dualkv_layout the "
            f"model was given: {type(parent).__name__} does not pass the model call's keyword arguments on to it, so "
            f"dualkv cannot run this model. {SUPPORTED}."
        )

    def _culprits(self) -> list[str]:
        """Paths of the deepest modules that leak: a leaking module whose called descendants do not
        leak, or that still leaks with the outputs of its leaking ones cut from the graph."""
        calls = self._record_calls()
        children: dict[str, list[str]] = {name: [] for name in calls}
        for name in calls:
            if name:
                children[_nearest_recorded_ancestor(name, calls)].append(name)
        culprits: list[str] = []

        def visit(name: str) -> None:
            leaking = [child for child in children[name] if self._module_leaks(child, calls[child])]
            for child in leaking:
                visit(child)
            if not leaking or self._module_leaks(name, calls[name], cut=leaking):
                culprits.append(name)

        visit("")
        return culprits

    def _record_calls(self) -> dict[str, tuple[tuple, dict]]:
        """The arguments of every module's first call in one probe forward pass, cloned."""
        calls: dict[str, tuple[tuple, dict]] = {}
        handles = []
        for name, module in self.model.named_modules():

            def record(module, args, kwargs, name=name):
                if name not in calls:
                    calls[name] = (_map_tensors(args, _clone), _map_tensors(kwargs, _clone))

            handles.append(module.register_forward_pre_hook(record, with_kwargs=True))
        try:
            with self._context(), torch.no_grad():
                self._call(lambda: self.model(**self._model_inputs()))
        finally:
            for handle in handles:
                handle.remove()
        return calls

    def _module_leaks(self, name: str, call: tuple[tuple, dict], cut: list[str] = ()) -> bool:
        """The gradient test on one module re-run alone on its recorded inputs: every floating
        input with a token axis (and the input embeddings' output, for a module that embeds) is a
        leaf; the outputs of the modules in `cut` are detached. False when it cannot be re-run."""
        module = self.model.get_submodule(name)

        def run():
            leaves: list[tuple[torch.Tensor, int]] = []

            def as_leaf(tensor: torch.Tensor) -> torch.Tensor:
                axis = _token_axis(tensor)
                if axis is None or not tensor.is_floating_point():
                    return tensor.clone()
                leaf = tensor.clone().requires_grad_()
                leaves.append((leaf, axis))
                return leaf

            args, kwargs = _map_tensors(call[0], as_leaf), _map_tensors(call[1], as_leaf)
            with self._embeddings_as_leaves() as embedded:
                output = module(*args, **kwargs)
            outputs = [
                (tensor, _token_axis(tensor))
                for tensor in _tensors(output)
                if tensor.is_floating_point() and _token_axis(tensor) is not None
            ]
            return outputs, leaves + embedded

        handles = [
            self.model.get_submodule(child).register_forward_hook(
                lambda module, inputs, output: _map_tensors(output, torch.Tensor.detach)
            )
            for child in cut
        ]
        try:
            with self._context():
                return bool(self._leaking_pairs(run, self.leaking_rows, first_only=True))
        except Exception:  # a module that cannot run alone: its parent is named instead
            return False
        finally:
            for handle in handles:
                handle.remove()


def _input_embeddings(model: torch.nn.Module) -> torch.nn.Module:
    get = getattr(model, "get_input_embeddings", None)
    embeddings = None
    if callable(get):
        with contextlib.suppress(NotImplementedError, AttributeError):
            embeddings = get()
    if not isinstance(embeddings, torch.nn.Module):
        raise UnsupportedModelError(
            f"model: {type(model).__name__} has no input embeddings module (get_input_embeddings()), which dualkv's "
            f"check of its token mixing needs ({MODEL_CHECK_VARIABLE}=0 skips the check)"
        )
    return embeddings


@contextlib.contextmanager
def _packed_forward_if_dispatching(model: torch.nn.Module):
    from .integrations.attention import packed_forward

    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    dispatching = isinstance(implementation, str) and implementation.startswith(DISPATCH_PREFIX)
    with packed_forward() if dispatching else contextlib.nullcontext():
        yield


def _visibility(layout: Layout) -> torch.Tensor:
    """(T, T) bool: [t, u] iff token t may see token u (design section 2)."""
    segment, group = layout.segment_ids, layout.group_ids
    is_prompt = torch.zeros(layout.num_segments, dtype=torch.bool)
    is_prompt[layout.cu_groups[:-1].long()] = True
    position = torch.arange(layout.num_tokens)
    same_group = group[:, None] == group[None, :]
    causal = position[None, :] <= position[:, None]
    shared = is_prompt[segment][None, :] | (segment[:, None] == segment[None, :])
    return same_group & causal & shared


def _token_axis(tensor: torch.Tensor) -> int | None:
    """The one axis of size PROBE_TOKENS, or None (none, or several: a (T, T) mask, say)."""
    axes = [axis for axis, size in enumerate(tensor.shape) if size == PROBE_TOKENS]
    return axes[0] if len(axes) == 1 else None


def _model_output(output, model_name: str, tokens: int) -> torch.Tensor:
    """The per-token output of a model call on `tokens` tokens: logits, else the last hidden
    state, else the first tensor."""
    for name in ("logits", "last_hidden_state"):
        value = getattr(output, name, None)
        if isinstance(value, torch.Tensor):
            break
    else:
        value = next(iter(_tensors(output)), None)
    if not (isinstance(value, torch.Tensor) and value.is_floating_point() and tuple(value.shape[:2]) == (1, tokens)):
        raise UnsupportedModelError(
            f"{model_name}: its output holds no (1, {tokens}, ...) per-token tensor for the probe batch's {tokens} "
            "tokens, so dualkv cannot check how it mixes tokens"
        )
    return value


def _nearest_recorded_ancestor(name: str, calls: dict) -> str:
    parent = name
    while parent:
        parent = parent.rpartition(".")[0]
        if parent in calls:
            return parent
    return ""


def _raised_by_dualkv(error: BaseException) -> bool:
    """Whether the error passed through dualkv's code below the probe's own frames: dualkv's
    refusals (a sliding window, a softcap, a head dimension the kernels lack) already name their
    argument; an error of the model's own code reaches the probe without passing through dualkv."""
    traceback = error.__traceback__
    while traceback is not None:
        filename = os.path.realpath(traceback.tb_frame.f_code.co_filename)
        if filename.startswith(_PACKAGE_DIRECTORY) and filename != _THIS_FILE:
            return True
        traceback = traceback.tb_next
    return False


def _clone(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().clone()


def _map_tensors(value, function: Callable[[torch.Tensor], torch.Tensor]):
    """`value` with every tensor inside tuples, lists and dicts replaced by function(tensor)."""
    if isinstance(value, torch.Tensor):
        return function(value)
    if isinstance(value, tuple):
        items = [_map_tensors(item, function) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_map_tensors(item, function) for item in value]
    if isinstance(value, dict):  # transformers' ModelOutput too: a copy with its items replaced
        mapped = copy.copy(value)
        for key, item in value.items():
            mapped[key] = _map_tensors(item, function)
        return mapped
    return value


def _tensors(value) -> list[torch.Tensor]:
    """Every tensor in a (nested) output: tuples, lists, dicts and transformers' ModelOutputs."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):  # ModelOutput is an OrderedDict
        return [tensor for item in value.values() for tensor in _tensors(item)]
    if isinstance(value, (tuple, list)):
        return [tensor for item in value for tensor in _tensors(item)]
    return []
