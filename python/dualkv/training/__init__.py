"""dualkv.training: the GRPO/DAPO policy update on packed batches, with FSDP2 data parallelism and
Ulysses sequence parallelism. `python -m dualkv.training --help` runs it from the command line."""

from .parallel import Parallelism, init_parallelism, shard_policy
from .policy import PackedPolicy
from .rollouts import RolloutGroup, TrajectoryGroup, load_jsonl, load_parquet, load_rollouts, synthetic_rollouts
from .step import UpdateConfig, policy_update

__all__ = [
    "PackedPolicy",
    "Parallelism",
    "RolloutGroup",
    "TrajectoryGroup",
    "UpdateConfig",
    "init_parallelism",
    "load_jsonl",
    "load_parquet",
    "load_rollouts",
    "policy_update",
    "shard_policy",
    "synthetic_rollouts",
]
