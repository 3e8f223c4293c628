"""The process grid of a policy update and the FSDP2 wrapping of a PackedPolicy.

Ranks form a (dp, sp) grid, rank = dp_rank * sp + sp_rank, so the ranks of one sequence-parallel
group are adjacent (one node, the all-to-all's fast links). FSDP2 shards parameters over all
ranks (the SP ranks too, as veRL and torchtitan do): SP ranks hold replicas of one computation,
DP ranks different data.

Gradient scaling: FSDP2 (like DDP) averages gradients over all dp * sp ranks. Over an SP group
the mean is what is wanted (dualkv.distributed.logprobs makes each SP rank's gradient W_sp times
its share); over DP ranks the sum is, since each DP rank's loss is already normalised by the whole
batch's counts, so `policy_update` multiplies its backward loss by the DP size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import dualkv

from .policy import PackedPolicy

__all__ = ["Parallelism", "init_distributed", "init_parallelism", "shard_policy"]


@dataclass(frozen=True)
class Parallelism:
    """This rank's place in the (dp, sp) grid; the groups are None in a single process."""

    dp_size: int
    sp_size: int
    dp_rank: int
    dp_group: dist.ProcessGroup | None
    sp_group: dist.ProcessGroup | None
    device: torch.device

    @classmethod
    def single(cls, device: torch.device | str = "cpu") -> Parallelism:
        """One process, no torch.distributed: no data or sequence parallelism."""
        return cls(1, 1, 0, None, None, torch.device(device))


def init_distributed(requested: str | None) -> torch.device:
    """Initialises the default process group: torchrun's environment when present (NCCL on GPUs,
    gloo on CPUs), else a one-process group (FSDP2 needs one even alone). `requested` is "cpu",
    "cuda" or None (cuda when a GPU and dualkv's CUDA kernels are there). Returns this rank's device."""
    use_cuda = requested == "cuda" or (requested is None and torch.cuda.is_available() and dualkv.cuda_compiled())
    if use_cuda and not dualkv.cuda_compiled():
        raise ValueError(
            "requested (--device): cuda needs dualkv built with its CUDA kernels (DUALKV_CUDA=1 pip install .)"
        )
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if use_cuda else "gloo"
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return device


def init_parallelism(sp_size: int, device: torch.device | str) -> Parallelism:
    """The grid over the default process group (already initialised); sp_size must divide the
    world size. Collective: every rank calls it."""
    if not dist.is_initialized():
        raise RuntimeError("init_parallelism: torch.distributed is not initialised (init_process_group first)")
    world = dist.get_world_size()
    if sp_size < 1 or world % sp_size:
        raise ValueError(f"sp_size: must be >= 1 and divide the world size {world}, got {sp_size}")
    device = torch.device(device)
    mesh = init_device_mesh(device.type, (world // sp_size, sp_size), mesh_dim_names=("dp", "sp"))
    return Parallelism(
        dp_size=world // sp_size,
        sp_size=sp_size,
        dp_rank=dist.get_rank() // sp_size,
        dp_group=mesh.get_group("dp"),
        sp_group=mesh.get_group("sp"),
        device=device,
    )


def shard_policy(
    policy: PackedPolicy,
    parallel: Parallelism,
    *,
    param_dtype: torch.dtype | None = torch.bfloat16,
    reduce_dtype: torch.dtype = torch.float32,
    activation_checkpointing: bool = True,
) -> PackedPolicy:
    """FSDP2 over every rank: one unit per decoder layer, the root (embeddings, final norm, LM
    head) last. The parameters stay in their own dtype (fp32 master weights); the forward and
    backward compute in param_dtype (None: the parameters' dtype) and gradients are reduced in
    reduce_dtype. Activation checkpointing recomputes each decoder layer in backward; it is
    enabled before sharding, as FSDP2 expects. Returns `policy`, sharded in place."""
    if activation_checkpointing:
        policy.lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    mesh = init_device_mesh(parallel.device.type, (dist.get_world_size(),))
    mixed_precision = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    for layer in policy.decoder_layers:
        fully_shard(layer, mesh=mesh, mp_policy=mixed_precision)
    fully_shard(policy, mesh=mesh, mp_policy=mixed_precision)
    return policy
