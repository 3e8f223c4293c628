"""A causal LM scored on packed batches: one module whose forward returns per-response log-probs.

The log-probs come from the final hidden states and the LM head weight, a chunk of rows at a
time (`response_logprobs_from_hidden`), so no (T, vocab) logits exist. Doing that inside this
module's forward matters under FSDP2: the LM head weight (and the embeddings) belong to the root
FSDP unit, which is unsharded exactly while this forward runs and again before its backward.
"""

from __future__ import annotations

import math
import numbers

import torch

from ..distributed.logprobs import sharded_response_logprobs_from_hidden
from ..distributed.sequence import SequenceShard
from ..logprobs import response_logprobs_from_hidden
from ..packing import PackedBatch
from ..token_mixing import check_token_mixing

__all__ = ["PackedPolicy"]


class PackedPolicy(torch.nn.Module):
    """Wraps a transformers causal LM built with attn_implementation="dualkv", whose layers
    `dualkv.token_mixing.check_token_mixing` accepts (checked here, before any FSDP wrapping).

    forward(batch) takes a PackedBatch (the whole packed stream on this rank) or a SequenceShard
    (this rank's rows under sequence parallelism) and returns (logprobs, entropy), each
    (num_responses, max_R) float32 in the batch's response layout.
    """

    def __init__(self, causal_lm: torch.nn.Module, temperature: float = 1.0):
        super().__init__()
        if getattr(causal_lm.config, "_attn_implementation", None) != "dualkv":
            raise ValueError(
                "causal_lm: must be built with attn_implementation='dualkv' (import dualkv.transformers first)"
            )
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
            raise TypeError(f"temperature: expected a real number, got {type(temperature).__name__}")
        if not (math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature: must be finite and > 0, got {temperature}")
        # Before any sharding wraps it: every layer that mixes tokens must keep to the layout.
        check_token_mixing(causal_lm)
        self.lm = causal_lm
        self.temperature = temperature

    @property
    def decoder_layers(self) -> torch.nn.ModuleList:
        """The transformer blocks, each its own FSDP unit."""
        return self.lm.get_decoder().layers

    def forward(self, batch: PackedBatch | SequenceShard) -> tuple[torch.Tensor, torch.Tensor]:
        weight = self.lm.get_output_embeddings().weight
        if isinstance(batch, SequenceShard):
            hidden = self.lm.get_decoder()(**batch.model_inputs()).last_hidden_state
            return sharded_response_logprobs_from_hidden(
                hidden, weight, batch, temperature=self.temperature, return_entropy=True
            )
        if not isinstance(batch, PackedBatch):
            raise TypeError(f"batch: expected a PackedBatch or SequenceShard, got {type(batch).__name__}")
        hidden = self.lm.get_decoder()(
            input_ids=batch.input_ids, position_ids=batch.position_ids, dualkv_layout=batch.layout, use_cache=False
        ).last_hidden_state
        return response_logprobs_from_hidden(hidden, weight, batch, temperature=self.temperature, return_entropy=True)
