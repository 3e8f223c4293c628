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
