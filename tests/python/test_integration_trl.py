"""DualKVGRPOTrainer against the plain trl.GRPOTrainer on one tiny Qwen3 (fp32, CPU): the same
per-token log-probs and entropies, loss and gradients, and the same parameters after real
training steps (generation, rewards, advantages and all), on batches whose groups are shuffled,
of different sizes, and hold truncated and empty completions."""

import pytest
import torch
from transformers import set_seed

pytest.importorskip("trl", reason="the TRL integration tests need trl (pip install dualkv[trl])")

from trl_support import PAD, tiny_qwen3, trainer_pair  # noqa: E402

from dualkv.integrations import grouping  # noqa: E402

# (prompt, completion) rows; completion None means the row is truncated and masked
# (mask_truncated_completions), [] an empty completion.
A, B, C = [2, 3, 4], [5, 6, 7], [8, 9]  # A and B: same length, different tokens
BATCHES = {
    # Groups interleaved: row order says nothing about groups.
    "shuffled": [(A, [10, 11, 1]), (B, [12, 13, 14, 15]), (A, [16, 1]), (C, [17, 18]), (B, [19]), (A, [20, 21, 22])],
    # Different N per prompt, one singleton group.
    "ragged_n": [(C, [30, 31]), (A, [32, 33, 34, 1]), (C, [35]), (B, [36, 37]), (C, [38, 39, 40, 41]), (C, [42, 1])],
    # Truncated (masked) and empty completions, and a group left with nothing to score.
    "truncated_and_empty": [
        (A, [50, 51, 52, 53]),
        (A, None),
        (B, []),
        (A, [54, 1]),
        (C, None),
        (B, [55, 56]),
        (C, []),
    ],
}


def make_batch(rows, completion_width=4):
    """GRPOTrainer's tensors: left-padded prompts, right-padded completions, masks."""
    prompt_width = max(len(p) for p, _ in rows) + 1  # one column of padding for every row
    prompt_ids = torch.full((len(rows), prompt_width), PAD)
    prompt_mask = torch.zeros_like(prompt_ids)
    completion_ids = torch.full((len(rows), completion_width), PAD)
    completion_mask = torch.zeros_like(completion_ids)
    for b, (prompt, completion) in enumerate(rows):
        prompt_ids[b, prompt_width - len(prompt) :] = torch.tensor(prompt)
        prompt_mask[b, prompt_width - len(prompt) :] = 1
        if completion is None:  # truncated: ids fill the row, the mask is zeroed
            completion_ids[b] = torch.arange(60, 60 + completion_width)
        elif completion:
            completion_ids[b, : len(completion)] = torch.tensor(completion)
            completion_mask[b, : len(completion)] = 1
    return prompt_ids, prompt_mask, completion_ids, completion_mask


def scoring_inputs(rows):
    prompt_ids, prompt_mask, completion_ids, completion_mask = make_batch(rows)
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    return input_ids, attention_mask, completion_ids.shape[1]


@pytest.fixture(scope="module")
def trainers(tmp_path_factory):
    return trainer_pair(tmp_path_factory.mktemp("trl"))


@pytest.fixture(scope="module")
def hybrid_trainers(tmp_path_factory):
    return trainer_pair(tmp_path_factory.mktemp("trl-hybrid"), hybrid=True)


def count_packed_tokens(trainer, monkeypatch):
    """Records the packed length of every dualkv scoring call of `trainer`'s policy model."""
    seen = []
    model = trainer.model
    forward = model.forward

    def spy(*args, dualkv_packed=None, **kwargs):
        if dualkv_packed is not None:
            seen.append(dualkv_packed.num_tokens)
        return forward(*args, dualkv_packed=dualkv_packed, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    return seen


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("batch_size", [None, 2])
def test_logps_and_entropies_equal_plain_trainer(trainers, batch, batch_size, monkeypatch):
    plain, packed = trainers
    rows = BATCHES[batch]
    input_ids, attention_mask, keep = scoring_inputs(rows)
    packed_lengths = count_packed_tokens(packed, monkeypatch)
    with torch.no_grad():
        expected = plain._get_per_token_logps_and_entropies(
            plain.model, input_ids, attention_mask, keep, batch_size=batch_size, compute_entropy=True
        )
        got = packed._get_per_token_logps_and_entropies(
            packed.model, input_ids, attention_mask, keep, batch_size=batch_size, compute_entropy=True
        )
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[1], expected[1], rtol=1e-5, atol=1e-6)
    assert got[2] is None
    # It ran packed: each distinct prompt once per pass, fewer tokens than the scored rows hold.
    scored = attention_mask[:, -keep:].any(dim=1)
    assert packed_lengths and sum(packed_lengths) < int(attention_mask[scored].sum())
    if batch_size is None:
        distinct_prompts = {tuple(p) for p, c in rows if c}
        completion_tokens = sum(len(c) for _, c in rows if c)
        assert packed_lengths == [sum(len(p) for p in distinct_prompts) + completion_tokens]


def loss_inputs(rows, generator):
    prompt_ids, prompt_mask, completion_ids, completion_mask = make_batch(rows)
    num_rows, width = completion_ids.shape
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.randn(num_rows, generator=generator),
        # Off-policy old log-probs make the clip active on some tokens.
        "old_per_token_logps": -4.0 + 0.3 * torch.randn(num_rows, width, generator=generator),
        "ref_per_token_logps": -4.0 + 0.3 * torch.randn(num_rows, width, generator=generator),
        "num_items_in_batch": completion_mask.sum(),
    }


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "bnpo", "dr_grpo"])
def test_loss_and_gradients_equal_plain_trainer(trainers, batch, loss_type, monkeypatch):
    plain, packed = trainers
    inputs = loss_inputs(BATCHES[batch], torch.Generator().manual_seed(7))
    results = []
    for trainer in (plain, packed):
        monkeypatch.setattr(trainer, "loss_type", loss_type)
        # Set by Trainer.train() for each optimizer step; one accumulation step here.
        monkeypatch.setattr(trainer, "current_gradient_accumulation_steps", 1, raising=False)
        trainer.model.train()
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        grads = {name: p.grad.clone() for name, p in trainer.model.named_parameters()}
        results.append((loss.detach(), grads))
    (expected_loss, expected_grads), (loss, grads) = results
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-7)
    assert expected_grads.keys() == grads.keys()
    assert any(g.abs().max() > 0 for g in expected_grads.values())
    for name, expected in expected_grads.items():
        torch.testing.assert_close(grads[name], expected, rtol=1e-4, atol=1e-7, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_hybrid_model_scores_and_loss_equal_plain_trainer(hybrid_trainers, batch):
    """A Qwen3.5 (Gated DeltaNet, then gated attention): the plain trainer's left-padded rows against
    the packed groups, where each response starts from its prompt's recurrent state."""
    plain, packed = hybrid_trainers
    input_ids, attention_mask, keep = scoring_inputs(BATCHES[batch])
    with torch.no_grad():
        expected = plain._get_per_token_logps_and_entropies(plain.model, input_ids, attention_mask, keep)
        got = packed._get_per_token_logps_and_entropies(packed.model, input_ids, attention_mask, keep)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-6)
    inputs = loss_inputs(BATCHES[batch], torch.Generator().manual_seed(8))
    results = []
    for trainer in (plain, packed):
        trainer.current_gradient_accumulation_steps = 1
        trainer.model.train()
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        results.append((loss.detach(), {name: p.grad.clone() for name, p in trainer.model.named_parameters()}))
    (expected_loss, expected_grads), (loss, grads) = results
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-7)
    for name, expected in expected_grads.items():
        torch.testing.assert_close(grads[name], expected, rtol=1e-4, atol=1e-7, msg=lambda m: f"{name}: {m}")


def test_bf16_mixed_precision_within_the_plain_trainers_error(trainers, tmp_path):
    """bf16 autocast over fp32 weights (TRL's bf16=True): the packed scoring's error against the
    fp32 result is at most twice the plain trainer's own bf16 error (the repository's bf16 rule)."""
    reference, _ = trainers
    plain, packed = trainer_pair(tmp_path, {"bf16": True})
    input_ids, attention_mask, keep = scoring_inputs(BATCHES["shuffled"])
    with torch.no_grad():
        exact = reference._get_per_token_logps_and_entropies(reference.model, input_ids, attention_mask, keep)[0]
        plain_bf16 = plain._get_per_token_logps_and_entropies(plain.model, input_ids, attention_mask, keep)[0]
        packed_bf16 = packed._get_per_token_logps_and_entropies(packed.model, input_ids, attention_mask, keep)[0]
    plain_error = (plain_bf16 - exact).abs().max()
    assert plain_error > 0, "autocast did not engage; the test would compare fp32 with fp32"
    assert (packed_bf16 - exact).abs().max() <= 2 * plain_error


def test_nothing_to_score_still_reaches_the_parameters(trainers):
    """Every completion empty or truncated: zero log-probs, and backward gives zero gradients
    (not an error), as in the plain trainer."""
    _, packed = trainers
    input_ids, attention_mask, keep = scoring_inputs([(A, None), (B, []), (C, None)])
    packed.model.zero_grad(set_to_none=True)
    logps, entropies, _ = packed._get_per_token_logps_and_entropies(
        packed.model, input_ids, attention_mask, keep, compute_entropy=True
    )
    assert torch.equal(logps, torch.zeros_like(logps)) and torch.equal(entropies, torch.zeros_like(entropies))
    logps.sum().backward()
    assert all(p.grad is not None and not p.grad.any() for p in packed.model.parameters())


def test_training_steps_equal_plain_trainer(tmp_path):
    """Two optimizer steps of real GRPO (sampled completions, truncation masked, KL to the
    reference, gradient accumulation over shuffled micro-steps) give the same parameters."""
    overrides = dict(
        max_steps=2,
        gradient_accumulation_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=5,
        mask_truncated_completions=True,
        num_iterations=2,
        loss_type="dapo",
        gradient_checkpointing=True,
        # SGD, not Adam: Adam divides by the gradient's running RMS, so on a parameter whose
        # gradient is ~0 it turns a 1e-9 difference into a full-size step of either sign.
        optim="sgd",
        learning_rate=0.1,
        # A random model rarely samples EOS; with few tokens allowed, some completions end and
        # some are truncated (and masked), so both kinds are in the batch.
        generation_kwargs={"suppress_tokens": list(range(16, 64))},
    )
    plain, packed = trainer_pair(tmp_path, overrides)
    torch.testing.assert_close(
        dict(packed.model.named_parameters()), dict(plain.model.named_parameters()), rtol=0, atol=0
    )
    for trainer in (plain, packed):
        set_seed(0)  # Trainer.train() does not reseed: both must sample from the same RNG state
        trainer.train()
    start = dict(tiny_qwen3(0).named_parameters())
    moved = [name for name, p in plain.model.named_parameters() if not torch.equal(p, start[name])]
    assert moved, "the plain trainer did not update the model; the comparison would be vacuous"
    for name, expected in plain.model.named_parameters():
        torch.testing.assert_close(
            dict(packed.model.named_parameters())[name], expected, rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}"
        )
    losses = [[log["loss"] for log in t.state.log_history if "loss" in log] for t in (plain, packed)]
    assert len(losses[0]) == 2
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=1e-4, atol=1e-6)


def test_peft_lora_equals_plain_trainer(tmp_path):
    """LoRA: the policy's loss and adapter gradients, and the reference log-probs GRPOTrainer takes
    with the adapter disabled, through PEFT's wrapper around the packed scoring entry."""
    peft = pytest.importorskip("peft")
    from trl.trainer.utils import use_adapter

    lora = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    plain, packed = trainer_pair(tmp_path, peft_config=lora)
    inputs = loss_inputs(BATCHES["truncated_and_empty"], torch.Generator().manual_seed(8))
    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    results = []
    for trainer in (plain, packed):
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        grads = {name: p.grad for name, p in trainer.model.named_parameters() if p.grad is not None}
        with torch.no_grad(), use_adapter(trainer.model, adapter_name=None):
            reference = trainer._get_per_token_logps_and_entropies(
                trainer.model, input_ids, attention_mask, inputs["completion_ids"].shape[1]
            )[0]
        results.append((loss.detach(), grads, reference))
    (expected_loss, expected_grads, expected_reference), (loss, grads, reference) = results
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-7)
    assert expected_grads and expected_grads.keys() == grads.keys()
    for name, expected in expected_grads.items():
        torch.testing.assert_close(grads[name], expected, rtol=1e-4, atol=1e-7, msg=lambda m: f"{name}: {m}")
    torch.testing.assert_close(reference, expected_reference, rtol=1e-5, atol=1e-6)


def test_multimodal_inputs_are_refused(trainers):
    _, packed = trainers
    input_ids, attention_mask, keep = scoring_inputs(BATCHES["shuffled"])
    with pytest.raises(ValueError, match="pixel_values: .*multimodal"):
        packed._get_per_token_logps_and_entropies(
            packed.model, input_ids, attention_mask, keep, pixel_values=torch.zeros(1, 3, 4, 4)
        )


def test_model_on_plain_dualkv_attention_is_refused(tmp_path):
    from dualkv.integrations.attention import use_packed_attention

    model = tiny_qwen3(0, attention="dualkv")
    with pytest.raises(ValueError, match="attn_implementation='dualkv'.*generate"):
        use_packed_attention(model)


def test_groups_come_from_prompt_content_not_order():
    prompt_ids = torch.tensor([[0, 2, 3], [4, 5, 6], [0, 2, 3], [0, 4, 5], [4, 5, 6]])
    ids = grouping.groups_from_prompts(prompt_ids, (prompt_ids != 0).long())
    assert ids.tolist() == [0, 1, 0, 2, 1]


def test_uid_with_different_prompts_is_refused():
    prompt_ids = torch.tensor([[2, 3], [2, 4]])
    with pytest.raises(ValueError, match="uids: uid 'u7' maps to rows with different prompts"):
        grouping.groups_from_uids(["u7", "u7"], prompt_ids, torch.ones_like(prompt_ids))
    assert grouping.groups_from_uids(["x", "y"], prompt_ids, torch.ones_like(prompt_ids)).tolist() == [0, 1]


def test_example_script_runs(tmp_path):
    """examples/trl_grpo_dualkv.py as a user runs it (tiny random Qwen3, offline, one step)."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(root / "examples" / "trl_grpo_dualkv.py"), "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loss per step: [" in result.stdout
