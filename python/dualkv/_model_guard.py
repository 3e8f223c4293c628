"""What `import dualkv.transformers` adds to transformers' PreTrainedModel, for models whose
attention implementation is dualkv's ("dualkv", or "dualkv_or_<fallback>" from the trainer
integrations); other models are untouched.

- The model is checked (`dualkv.token_mixing.check_token_mixing`) before its first call with a
  packed batch: transformers loads any model with any registered attention implementation, also
  models whose layers never call it (Mamba, RWKV) or compute attention themselves (Bloom), whose
  packed results would otherwise be silently wrong. The check is hooked where the model's attention
  implementation is decided, at construction and in set_attn_implementation.
- A packed call whose input_ids are 1-D is refused naming input_ids, in a forward pre-hook that
  stays: with 1-D position_ids too, transformers' own mask preprocessing would fail on it with an
  IndexError before any dualkv code runs.
- Some modeling files pick their attention layer class from a table of implementations (Falcon,
  GPT-J, GPT-Neo) and fail inside their constructor with KeyError('dualkv'); the constructors
  (`from_config`, `from_pretrained`) turn that into an UnsupportedModelError (a ValueError) naming
  the model and the cause.
"""

from __future__ import annotations

import functools

import torch
from transformers import PreTrainedModel

from .token_mixing import SUPPORTED, UnsupportedModelError, guard_first_packed_forward, is_dualkv_attention

__all__ = ["install", "not_one_sequence"]


def install() -> None:
    """Idempotent."""
    adjust = PreTrainedModel._check_and_adjust_attn_implementation
    if getattr(adjust, "_dualkv", False):
        return
    PreTrainedModel._check_and_adjust_attn_implementation = _guarding(adjust)
    PreTrainedModel._from_config = _naming_table_errors(PreTrainedModel._from_config)
    PreTrainedModel.from_pretrained = _naming_table_errors(PreTrainedModel.from_pretrained)


def _guarding(adjust):
    @functools.wraps(adjust)
    def check_and_adjust(self, *args, **kwargs):
        implementation = adjust(self, *args, **kwargs)
        if is_dualkv_attention(implementation):
            guard_first_packed_forward(self)
            if _refuse_unbatched_input_ids not in self._forward_pre_hooks.values():
                self.register_forward_pre_hook(_refuse_unbatched_input_ids, with_kwargs=True)
        return implementation

    check_and_adjust._dualkv = True
    return check_and_adjust


def _naming_table_errors(constructor: classmethod):
    function = constructor.__func__

    @functools.wraps(function)
    def construct(cls, *args, **kwargs):
        try:
            return function(cls, *args, **kwargs)
        except KeyError as error:
            if len(error.args) == 1 and is_dualkv_attention(error.args[0]):
                raise UnsupportedModelError(
                    f"attn_implementation: {cls.__name__}'s modeling code picks its attention layer from a fixed table "
                    f"of implementations (eager, sdpa, ...) that has no {error.args[0]!r}, so dualkv cannot run this "
                    f"model. {SUPPORTED}."
                ) from error
            raise

    return classmethod(construct)


def not_one_sequence(batch_size: int) -> ValueError:
    """The error for a packed call whose input_ids are not one sequence of the packed tokens."""
    return ValueError(
        "input_ids: must be (1, T), the packed batch as one sequence (packed.input_ids); got "
        f"{batch_size} sequences (a 1-D input_ids of T tokens reads as T sequences of one token)"
    )


def _refuse_unbatched_input_ids(model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
    if kwargs.get("dualkv_layout") is None:
        return
    input_ids = kwargs["input_ids"] if "input_ids" in kwargs else (args[0] if args else None)
    if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 1:
        raise not_one_sequence(input_ids.shape[0])
