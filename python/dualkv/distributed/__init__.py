"""dualkv.distributed: scale-out on torch.distributed.

- `ulysses_attention`: Ulysses sequence parallelism for the packed stream (all-to-all from
  sequence shards to head shards around the attention op, any group size that divides H).
- `shard_sequence`: this rank's rows of a packed batch; `model(**shard.model_inputs())` runs a
  transformers model ("dualkv" attention) on them.
- `sharded_response_logprobs(_from_hidden)`: per-response log-probs from sequence-sharded logits
  or hidden states, identical on every rank, without gathering the logits.
- `ulysses_causal_conv1d`, `ulysses_gated_delta_rule`: the recurrent layers' token mixing
  (`dualkv.recurrent`) on a sequence-sharded stream, by the same exchange, channels or heads.
"""

from .logprobs import sharded_response_logprobs, sharded_response_logprobs_from_hidden
from .recurrent import ulysses_causal_conv1d, ulysses_gated_delta_rule
from .sequence import SequenceParallelLayout, SequenceShard, shard_sequence
from .ulysses import kv_replication, ulysses_attention

__all__ = [
    "SequenceParallelLayout",
    "SequenceShard",
    "kv_replication",
    "shard_sequence",
    "sharded_response_logprobs",
    "sharded_response_logprobs_from_hidden",
    "ulysses_attention",
    "ulysses_causal_conv1d",
    "ulysses_gated_delta_rule",
]
