"""dualkv.distributed: scale-out on torch.distributed.

- `ulysses_attention`: Ulysses sequence parallelism for the packed stream (all-to-all from
  sequence shards to head shards around the attention op, any group size that divides H).
"""

from .ulysses import kv_replication, ulysses_attention

__all__ = ["kv_replication", "ulysses_attention"]
