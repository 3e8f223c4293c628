"""veRL's FSDP engine with every log-prob forward on packed prompt groups.

`FSDPEngineWithLMHead.forward_step` runs prepare_model_inputs -> module(**inputs) ->
prepare_model_outputs -> loss for each micro-batch, for the actor update and for the old- and
reference-log-prob passes alike. This subclass replaces the two preparation steps: the
micro-batch's rows are regrouped by uid into dualkv's packed form (sequence-sharded under
Ulysses), the model scores it through `model(dualkv_packed=...)`, and the results return as
veRL's per-row jagged log-probs and entropies, so veRL's losses, micro-batching, shuffling and
batch balancing run unchanged. A micro-batch that splits a group stores that prompt once per
micro-batch it appears in: less sharing, same numbers.
"""

from __future__ import annotations

import torch
from verl.utils import tensordict_utils as tu
from verl.utils.ulysses import get_ulysses_sequence_parallel_group
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

from ...distributed import shard_sequence
from ...token_mixing import mark_token_mixing_checked
from ..attention import use_packed_attention
from ..scoring import install_packed_scoring
from .batch import pack_micro_batch, to_jagged_rows

__all__ = ["DualKVFSDPEngineWithLMHead", "enable_packed_scoring"]

# Micro-batch options whose outputs the packed path does not produce.
_UNSUPPORTED_OPTIONS = {
    "calculate_sum_pi_squared": "sum_pi_squared needs the full logits of every row",
    "distillation_use_topk": "top-K distillation reads the N-copy logits",
    "distillation_only": "distillation reads the N-copy logits",
}


class DualKVFSDPEngineWithLMHead(FSDPEngineWithLMHead):
    """veRL's language-model FSDP engine (fsdp / fsdp2) scoring packed micro-batches."""

    def _build_module(self):
        return enable_packed_scoring(super()._build_module())

    def prepare_model_inputs(self, micro_batch):
        self._check_supported(micro_batch)
        batch = pack_micro_batch(micro_batch)
        if batch.packed is None:
            # No row has a response token: nothing to score, but a loss must still reach the
            # parameters; veRL's own forward over the prompts gives that (all zero gradients).
            return super().prepare_model_inputs(micro_batch)
        packed = batch.packed.to(micro_batch["input_ids"].device)
        scored = shard_sequence(packed, get_ulysses_sequence_parallel_group()) if self.use_ulysses_sp else packed
        inputs = {"dualkv_packed": scored, "dualkv_temperature": _temperature(micro_batch["temperature"])}
        return inputs, {"dualkv_batch": batch}

    def prepare_model_outputs(self, output, output_args, micro_batch, logits_processor_func):
        batch = output_args.get("dualkv_batch")
        if batch is None:
            return super().prepare_model_outputs(output, output_args, micro_batch, logits_processor_func)
        logprobs, entropy = output
        model_output = {"log_probs": to_jagged_rows(logprobs, batch)}
        if tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False):
            model_output["entropy"] = to_jagged_rows(entropy, batch)
        return model_output

    def _check_supported(self, micro_batch) -> None:
        for key, why in _UNSUPPORTED_OPTIONS.items():
            if tu.get_non_tensor_data(data=micro_batch, key=key, default=False):
                raise ValueError(f"{key}: not supported by the dualkv engine ({why})")
        if micro_batch.get("multi_modal_inputs", None) is not None or micro_batch["position_ids"].dim() == 3:
            raise ValueError("multi_modal_inputs: the dualkv engine packs text-only batches")
        if self.pad_to_length:
            raise ValueError(
                "pad_to_length: the dualkv engine does not pad packed micro-batches to buckets; turn it off"
            )


def enable_packed_scoring(module):
    """What the engine does to the HF model it loads, before LoRA and FSDP wrap it: packed
    attention and scoring, and the check that every layer mixing tokens keeps to the layout. veRL
    loads the weights on rank 0 only when it can (the others hold the same model on the meta
    device until FSDP broadcasts them): rank 0's check stands for all, and a refusal there ends
    the run."""
    use_packed_attention(module)
    install_packed_scoring(module)  # checks the model; the temperature comes with each micro-batch
    if any(p.is_meta for p in module.parameters()):
        mark_token_mixing_checked(module)
    return module


def _temperature(value) -> float:
    """veRL passes one temperature or one per row; the packed head takes one per micro-batch."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 0 or not bool((value == value.flatten()[0]).all()):
            raise ValueError("temperature: the dualkv engine needs one temperature for all rows of a micro-batch")
        return float(value.flatten()[0])
    return float(value)
