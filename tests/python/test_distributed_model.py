"""Tiny models with Ulysses sequence parallelism 2 and 4 (gloo) against the unsharded packed model:
log-probs, entropies, loss and every parameter gradient (the SP group's mean, as FSDP/DDP take it),
through the logits and through the hidden states; on prompt groups and on a tree of trajectories.
Qwen3, and the hybrid Qwen3.5 and Qwen3-Next, whose Gated DeltaNet layers hand prompt states and
convolution tails across shard boundaries."""

import copy

import pytest
import torch
import torch.distributed as dist
from distributed_support import run_ranks
from models_support import CONFIGS, rollouts
from transformers import AutoModelForCausalLM
from trees_support import agentic_trajectories

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv import losses
from dualkv.distributed import shard_sequence, sharded_response_logprobs, sharded_response_logprobs_from_hidden

# T = 51: one pad row at W = 2, and group 1's last prompt row (24) sits on rank 0 while most of
# its responses' rows sit on rank 1, so first tokens are scored across the shard boundary.
SHAPES = [(8, [3, 5, 1]), (8, [4, 2]), (5, [6]), (1, [2, 1, 3, 2])]


def _loss(logprobs, entropy, packed):
    gen = torch.Generator().manual_seed(7)
    rewards = torch.rand(packed.num_responses, generator=gen)
    noise = torch.randn(logprobs.shape, generator=gen)
    advantages = losses.group_advantages(rewards, packed.response_group)
    policy = losses.policy_loss(
        logprobs,
        logprobs.detach() + 0.1 * noise,
        advantages,
        packed.response_mask,
        clip_high=0.28,
        ref_logprobs=logprobs.detach() - 0.05 * noise.abs(),
        kl_coef=0.04,
    )
    return policy - 0.01 * losses.aggregate_tokens(entropy, packed.response_mask)


def _run(model, packed, scorer):
    model.zero_grad()
    logprobs, entropy = scorer(model, packed)
    loss = _loss(logprobs, entropy, packed)
    loss.backward()
    return logprobs.detach(), entropy.detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _unsharded_logits(model, packed):
    inputs = dict(input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout)
    return dualkv.response_logprobs(model(**inputs, use_cache=False).logits, packed, return_entropy=True)


def _unsharded_hidden(model, packed):
    inputs = dict(input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout)
    hidden = model.model(**inputs, use_cache=False).last_hidden_state
    return dualkv.response_logprobs_from_hidden(hidden, model.lm_head.weight, packed, return_entropy=True, chunk_rows=4)


def _sharded_logits(model, packed, min_tokens):
    shard = shard_sequence(packed, min_tokens=min_tokens)
    return sharded_response_logprobs(model(**shard.model_inputs()).logits, shard, return_entropy=True)


def _sharded_hidden(model, packed, min_tokens):
    shard = shard_sequence(packed, min_tokens=min_tokens)
    hidden = model.model(**shard.model_inputs()).last_hidden_state
    return sharded_response_logprobs_from_hidden(hidden, model.lm_head.weight, shard, return_entropy=True, chunk_rows=4)


def _assert_cross_rank_scoring(packed, world, min_tokens):
    """Some token is scored by a row of another segment (the prompt's last row; in a tree, the
    parent segment's last row) that another rank holds."""
    local = -(-max(packed.num_tokens, min_tokens) // world)
    segment = packed.layout.segment_ids
    mask = packed.response_mask
    other_segment = segment[packed.score_rows] != segment[packed.token_rows]
    other_rank = packed.score_rows // local != packed.token_rows // local
    assert bool((other_segment & other_rank & mask).any())


def _body(rank, world, name, tree=False):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(CONFIGS[name](), attn_implementation="dualkv", dtype=torch.float32)
    reference = copy.deepcopy(model)
    packed = dualkv.pack_trajectories(agentic_trajectories(5)) if tree else dualkv.pack(*rollouts(11, SHAPES))
    # The tree's 55 rows padded to 66: rank 1 starts at row 33, the first row of a segment whose
    # parent ends on rank 0.
    min_tokens = 66 if tree else 0
    _assert_cross_rank_scoring(packed, world, min_tokens)
    for unsharded, sharded in ((_unsharded_logits, _sharded_logits), (_unsharded_hidden, _sharded_hidden)):
        ref_logprobs, ref_entropy, ref_loss, ref_grads = _run(reference, packed, unsharded)
        logprobs, entropy, loss, grads = _run(model, packed, lambda m, p: sharded(m, p, min_tokens))
        what = f"rank {rank}, {sharded.__name__}"
        torch.testing.assert_close(logprobs, ref_logprobs, rtol=0, atol=1e-5, msg=lambda m: f"logprobs, {what}: {m}")
        torch.testing.assert_close(entropy, ref_entropy, rtol=0, atol=1e-5, msg=lambda m: f"entropy, {what}: {m}")
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-7, msg=lambda m: f"loss, {what}: {m}")
        for parameter, grad in grads.items():
            dist.all_reduce(grad)
            mean = grad / world
            error = (mean - ref_grads[parameter]).norm() / ref_grads[parameter].norm().clamp(min=1e-30)
            assert error <= 1e-4, f"{parameter}, {what}: relative gradient error {float(error):.2e}"


@pytest.mark.parametrize("name, world", [("qwen3", 2), ("qwen3_5", 2), ("qwen3_next", 4)])
def test_sequence_parallel_model_equals_unsharded_packed_model(tmp_path, name, world):
    run_ranks(world, tmp_path, _body, name)


def test_sequence_parallel_model_on_a_tree_equals_unsharded_packed_model(tmp_path):
    run_ranks(2, tmp_path, _body, "qwen3", True)
