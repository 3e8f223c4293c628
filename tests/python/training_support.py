"""A tiny Qwen3 policy, its reference, a rollout batch that needs several micro-batches (one group
split), rollout files, and the policy update written out directly on the whole batch, for the
training tests."""

import copy
import json

import pytest
import torch
from models_support import CONFIGS
from transformers import AutoModelForCausalLM

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv import losses
from dualkv.training import (
    PackedPolicy,
    RolloutGroup,
    UpdateConfig,
    init_parallelism,
    policy_update,
    shard_policy,
)

# Group 0 (7 + 26 tokens) exceeds MAX_TOKENS and is split; on 2 data-parallel ranks one rank has
# fewer micro-batches than the other and runs a weight-0 filler.
PROMPT_LENGTHS = [7, 7, 1, 5]
RESPONSE_LENGTHS = [[7, 5, 8, 6], [3, 5], [2, 5], [5, 2]]
MAX_TOKENS = 17
LEARNING_RATE = 1e-3


def rollouts(seed=5):
    gen = torch.Generator().manual_seed(seed)

    def ids(n):
        return tuple(torch.randint(1, 128, (n,), generator=gen).tolist())

    return [
        RolloutGroup(ids(p), tuple(ids(r) for r in rs), tuple(torch.rand(len(rs), generator=gen).tolist()))
        for p, rs in zip(PROMPT_LENGTHS, RESPONSE_LENGTHS)
    ]


def records(groups):
    """RolloutGroups as the {prompt, responses, rewards} records a rollout file holds."""
    return [{"prompt": list(g.prompt), "responses": [list(r) for r in g.responses], "rewards": list(g.rewards)}
            for g in groups]


def write_rollouts(path, records):
    """Writes records as JSONL, or as a parquet table when path ends in .parquet (skips the test
    when pyarrow is not installed; requirements-ci.txt pins it, so CI runs it)."""
    if path.suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records))


def config(**overrides):
    return UpdateConfig.grpo(MAX_TOKENS, clip_high=0.28, max_grad_norm=0.5, **overrides)


def models(seed=0, name="qwen3"):
    """The policy's causal LM (a models_support.CONFIGS name) and a reference LM a little away from
    it (so the KL term is not 0)."""
    torch.manual_seed(seed)
    lm = AutoModelForCausalLM.from_config(CONFIGS[name](), attn_implementation="dualkv", dtype=torch.float32)
    ref = copy.deepcopy(lm)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return lm, ref


def reference_step(lm, ref_lm, batch, cfg):
    """One packed forward over the whole batch, the library's aggregated loss, torch's clip and
    AdamW: what `policy_update` must equal however it splits the batch. Returns (loss, norm)."""
    packed = dualkv.pack([g.prompt for g in batch], [g.responses for g in batch])
    return reference_update(lm, ref_lm, packed, [r for g in batch for r in g.rewards], cfg)


def reference_update(lm, ref_lm, packed, rewards, cfg):
    """`reference_step` on a packed batch (its responses' rewards in order): the update on prompt
    groups or, from `dualkv.pack_trajectories`, on trajectory groups."""

    def score(model):
        hidden = model.model(
            input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout, use_cache=False
        ).last_hidden_state
        return dualkv.response_logprobs_from_hidden(hidden, model.lm_head.weight, packed)

    with torch.no_grad():
        old, ref = score(lm), score(ref_lm)
    advantages = losses.group_advantages(torch.tensor(rewards), packed.response_group)
    loss = losses.policy_loss(
        score(lm),
        old,
        advantages,
        packed.response_mask,
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        aggregation=cfg.aggregation,
        ref_logprobs=ref,
        kl_coef=cfg.kl_coef,
    )
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(lm.parameters(), cfg.max_grad_norm)
    torch.optim.AdamW(lm.parameters(), lr=LEARNING_RATE).step()
    return float(loss.detach()), float(norm)


def assert_same_update(before, after, expected_after, what):
    """The parameter updates agree: AdamW's first step is ~lr * sign(g), so compare the updates'
    norms, which a sign flip on a gradient entry that is ~0 in both barely moves."""
    for name, initial in before.items():
        delta, expected = after[name] - initial, expected_after[name] - initial
        error = (delta - expected).norm() / expected.norm().clamp(min=1e-30)
        assert error <= 1e-3, f"{name}, {what}: relative update error {float(error):.2e}"


def check_fsdp_updates(rank, world, batch, cfg, expected_of, check_metrics, name="qwen3"):
    """policy_update of model `name` (a models_support.CONFIGS name) on `batch` under FSDP2 with
    sequence parallelism 1 and 2 against the update written out on the whole batch:
    expected_of(lm, ref_lm, batch, cfg) -> (loss, norm, expected parameters); check_metrics(metrics,
    loss, norm, what) checks the step's metrics."""
    for sp in (1, 2):
        lm, ref_lm = models(name=name)
        loss, norm, expected = expected_of(lm, ref_lm, batch, cfg)
        before = {n: p.detach().clone() for n, p in lm.named_parameters()}
        parallel = init_parallelism(sp, "cpu")
        policy = shard_policy(PackedPolicy(lm), parallel, param_dtype=None)
        reference = shard_policy(PackedPolicy(ref_lm), parallel, param_dtype=None, activation_checkpointing=False)
        optimizer = torch.optim.AdamW(policy.parameters(), lr=LEARNING_RATE)
        metrics = policy_update(policy, optimizer, batch, cfg, parallel, reference=reference)
        what = f"{name}, rank {rank}, dp={world // sp}, sp={sp}"
        check_metrics(metrics, loss, norm, what)
        after = {n.removeprefix("lm."): p.full_tensor() for n, p in policy.named_parameters()}
        assert_same_update(before, after, expected, what)
