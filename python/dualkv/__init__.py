"""dualkv: fused shared-prompt attention (forward and backward) for GRPO/DAPO post-training.

A batch of G prompt groups is packed as [prompt_0 | its responses | prompt_1 | ...], so every
prompt is processed once instead of once per response (`Layout`); `attention` computes exactly
the attention each response would get in its own [prompt; response] sequence.
"""

import torch  # noqa: F401  (loads libtorch, which the extension links, before the extension)

from . import _C
from ._attention import attention, attention_with_lse
from ._layout import Layout

cuda_compiled = _C.cuda_compiled

__all__ = ["Layout", "attention", "attention_with_lse", "cuda_compiled"]

# Training-side pieces: packing, log-probs, losses (`import dualkv.transformers` separately: it
# imports transformers and registers attn_implementation="dualkv").
from . import losses  # noqa: E402
from .logprobs import response_logprobs, response_logprobs_from_hidden  # noqa: E402
from .packing import (  # noqa: E402
    PackedBatch,
    RowMap,
    pack,
    pack_rows,
    rows_to_responses,
    unpack_to_rows,
    unpack_tokens_to_rows,
)

__all__ += [
    "losses",
    "response_logprobs",
    "response_logprobs_from_hidden",
    "PackedBatch",
    "RowMap",
    "pack",
    "pack_rows",
    "rows_to_responses",
    "unpack_to_rows",
    "unpack_tokens_to_rows",
]
