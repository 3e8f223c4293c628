"""The GRPO/DAPO policy update (dualkv.training.policy_update) against the same update written out
on the whole batch: one process, then FSDP2 on 2 gloo processes with (dp, sp) = (2, 1) and (1, 2),
for a tiny Qwen3 and a tiny hybrid Qwen3.5. fp32, so the comparison is tight; the bf16 GPU version
is test_training_cuda.py."""

import copy

import pytest
import torch
from distributed_support import run_ranks
from training_support import (
    LEARNING_RATE,
    assert_same_update,
    check_fsdp_updates,
    config,
    models,
    reference_step,
    rollouts,
)

from dualkv.training import PackedPolicy, Parallelism, UpdateConfig, policy_update


def _expected(lm, ref_lm, batch, cfg):
    expected_lm = copy.deepcopy(lm)
    loss, norm = reference_step(expected_lm, ref_lm, batch, cfg)
    return loss, norm, {n: p.detach().clone() for n, p in expected_lm.named_parameters()}


def _check_metrics(metrics, loss, norm, batch, what):
    # Advantages are centred per group, so the loss (about 1e-3 here) is what is left of terms of
    # about 1/16 that cancel: their fp32 rounding (1e-8) is an absolute error, not a relative one.
    assert metrics["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-7), what
    assert metrics["grad_norm"] == pytest.approx(norm, rel=1e-4), what
    assert not metrics["skipped"]
    assert metrics["split_groups"] == [0]
    assert metrics["ncopy_tokens"] > metrics["packed_tokens"] >= sum(
        len(g.prompt) + sum(map(len, g.responses)) for g in batch
    )


# qwen3_5: Gated DeltaNet layers, whose recomputation under activation checkpointing must read the
# layout again, and a split group whose prompt runs in two micro-batches.
@pytest.mark.parametrize("name", ["qwen3", "qwen3_5"])
def test_single_process_update_equals_whole_batch_update(name):
    lm, ref_lm = models(name=name)
    batch, cfg = rollouts(), config()
    loss, norm, expected = _expected(lm, ref_lm, batch, cfg)
    before = {n: p.detach().clone() for n, p in lm.named_parameters()}
    lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy = PackedPolicy(lm)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=LEARNING_RATE)
    metrics = policy_update(policy, optimizer, batch, cfg, Parallelism.single(), reference=PackedPolicy(ref_lm))
    assert metrics["micro_steps"] > 1
    _check_metrics(metrics, loss, norm, batch, "one process")
    assert_same_update(before, dict(lm.named_parameters()), expected, "one process")


def _fsdp_body(rank, world, name):
    batch = rollouts()

    def check(metrics, loss, norm, what):
        _check_metrics(metrics, loss, norm, batch, what)

    check_fsdp_updates(rank, world, batch, config(), _expected, check, name=name)


# qwen3_5: FSDP2 units whose Gated DeltaNet layers read their convolution weight directly, and at
# sp=2 the recurrent state and convolution tail crossing the shard boundary.
@pytest.mark.parametrize("name", ["qwen3", "qwen3_5"])
def test_fsdp2_update_on_two_ranks_equals_whole_batch_update(tmp_path, name):
    run_ranks(2, tmp_path, _fsdp_body, name)


def test_bad_configuration_is_a_clear_error():
    with pytest.raises(ValueError, match="aggregation: expected one of"):
        UpdateConfig(100, aggregation="mean")
    for kl_coef in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="kl_coef: must be finite and >= 0"):
            UpdateConfig.grpo(100, kl_coef=kl_coef)
    with pytest.raises(TypeError, match="kl_coef: expected a number, got str"):
        UpdateConfig(100, kl_coef="0.1")
    lm, _ = models()
    with pytest.raises(ValueError, match="reference: a reference policy is required when kl_coef != 0"):
        policy_update(PackedPolicy(lm), torch.optim.AdamW(lm.parameters()), rollouts(), config(), Parallelism.single())
