"""dualkv: fused shared-prompt attention (forward and backward) for GRPO/DAPO post-training.

A batch of G prompt groups is packed as [prompt_0 | its responses | prompt_1 | ...], so every
prompt is processed once instead of once per response (`Layout`); `attention` computes exactly
the attention each response would get in its own [prompt; response] sequence. Multi-turn and
branching rollouts share every common prefix in a tree layout (`Layout.from_tree`,
`pack_trajectories`).
"""

import torch  # loads libtorch, which the extension links, before the extension

from ._build_info import torch_version as _built_for_torch

if torch.__version__ != _built_for_torch:
    raise ImportError(
        f"dualkv was built against torch {_built_for_torch} but torch {torch.__version__} is installed; "
        "rebuild it against this torch: pip install . --no-build-isolation"
    )

from . import _C  # noqa: E402
from ._attention import attention, attention_with_lse  # noqa: E402
from ._layout import Layout  # noqa: E402

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

from .trajectories import Turn, pack_trajectories  # noqa: E402

__all__ += [
    "losses",
    "Turn",
    "pack_trajectories",
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
