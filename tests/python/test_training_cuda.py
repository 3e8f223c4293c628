"""FSDP2 policy update on 2 GPUs (NCCL), sequence parallelism 1 and 2, and on 4 GPUs, SP 2 and 4
(SP 4 is above the model's Hk = 2, so K/V heads are replicated), against the same update on 1 GPU:
loss, gradient norm and the parameters after one step, within bf16 tolerance. A tiny Qwen3, and a
tiny Qwen3.5 (Gated DeltaNet on flash-linear-attention, its states handed across shards under SP).

bf16 compute with fp32 reduction and master weights, activation checkpointing, several micro-batches
(one group split). The optimizer is SGD so that the parameters after the step compare every
parameter's (clipped) gradient; AdamW's first step, ~lr * sign(g), would hide gradient errors
(test_training.py runs AdamW in fp32 on CPU ranks)."""

import copy

import pytest
import torch
from distributed_support import run_ranks
from models_support import hybrid_cuda_unavailable

import dualkv
from dualkv.training import (
    PackedPolicy,
    UpdateConfig,
    init_parallelism,
    policy_update,
    shard_policy,
    synthetic_rollouts,
)
from dualkv.training.models import build_model

pytestmark = pytest.mark.skipif(
    torch.cuda.device_count() < 2 or not dualkv.cuda_compiled(), reason="needs 2 GPUs and dualkv's CUDA kernels"
)

LEARNING_RATE = 0.5
# bf16 keeps 8 significant bits (relative step 2^-8 = 3.9e-3); sharded and unsharded runs sum in
# different orders, so allow a few steps of it, and a floor for entries that are ~0 in both.
RELATIVE = 2e-2
LOSS_FLOOR = 1e-3


def _rollouts():
    # 5 groups, N = 4, ragged responses; the budget splits the largest groups across micro-batches.
    return synthetic_rollouts(5, 4, 150, (20, 120), vocab_size=512, seed=3)


def _update(rank, world, sp, out_dir, model):
    device = torch.device("cuda", rank)
    lm = build_model(model, seed=0)
    ref_lm = copy.deepcopy(lm)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in ref_lm.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen))
    parallel = init_parallelism(sp, device)
    policy = shard_policy(PackedPolicy(lm.to(device)), parallel)
    reference = shard_policy(PackedPolicy(ref_lm.to(device)), parallel, activation_checkpointing=False)
    before = {n: p.full_tensor().float().cpu() for n, p in policy.named_parameters()}
    optimizer = torch.optim.SGD(policy.parameters(), lr=LEARNING_RATE)
    config = UpdateConfig.dapo(400, kl_coef=0.04)
    metrics = policy_update(policy, optimizer, _rollouts(), config, parallel, reference=reference)
    delta = {n: p.full_tensor().float().cpu() - before[n] for n, p in policy.named_parameters()}
    if rank == 0:
        torch.save({"metrics": metrics, "delta": delta}, out_dir / f"world{world}-sp{sp}.pt")


_HYBRID_SKIP = pytest.mark.skipif(hybrid_cuda_unavailable() is not None, reason=str(hybrid_cuda_unavailable()))


@pytest.fixture(scope="module", params=["tiny-qwen3", pytest.param("tiny-qwen3.5", marks=_HYBRID_SKIP)])
def one_gpu_update(request, tmp_path_factory):
    """The update on 1 GPU, run once per model for every multi-GPU case."""
    out_dir = tmp_path_factory.mktemp("one_gpu")
    run_ranks(1, out_dir, _update, 1, out_dir, request.param, backend="nccl")
    return request.param, torch.load(out_dir / "world1-sp1.pt")


@pytest.mark.parametrize("world, sp_sizes", [(2, (1, 2)), (4, (2, 4))])
def test_fsdp2_with_sequence_parallelism_equals_one_gpu(world, sp_sizes, one_gpu_update, tmp_path):
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} GPUs")
    model, expected = one_gpu_update
    assert expected["metrics"]["split_groups"], "the budget should split a group"
    for sp in sp_sizes:
        run_ranks(world, tmp_path, _update, sp, tmp_path, model, backend="nccl")
        got = torch.load(tmp_path / f"world{world}-sp{sp}.pt")
        what = f"{model}, {world} GPUs, sp={sp}"
        assert got["metrics"]["loss"] == pytest.approx(expected["metrics"]["loss"], rel=RELATIVE, abs=LOSS_FLOOR), what
        assert got["metrics"]["grad_norm"] == pytest.approx(expected["metrics"]["grad_norm"], rel=RELATIVE), what
        for name, reference in expected["delta"].items():
            error = (got["delta"][name] - reference).norm() / reference.norm().clamp(min=1e-30)
            assert error <= RELATIVE, f"{name}, {what}: relative update error {float(error):.2e}"
