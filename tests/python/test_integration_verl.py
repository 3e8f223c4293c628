"""The dualkv veRL engine against veRL's own padding-free engine path (fp32, CPU, one tiny Qwen3):
the same per-row log-probs and entropies (old/ref-log-prob pass), losses and gradients (actor
update with veRL's ppo_loss), on batches whose groups are shuffled, split across micro-batches,
of different sizes, with a micro-batch size that divides nothing."""

import pytest
import torch

pytest.importorskip("verl", reason="the veRL integration tests need verl (see docs/decisions.md: veRL in CI)")

import torch.distributed as dist  # noqa: E402
from trl_support import tiny_qwen3  # noqa: E402
from verl.workers.engine.fsdp import transformer_impl  # noqa: E402
from verl.workers.utils.padding import no_padding_2_padding  # noqa: E402
from verl_support import actor_config, engine_pair, loss_function, rollout_batch, run_on_cpu  # noqa: E402

A, B, C = [2, 3, 4], [5, 6, 7], [8, 9]  # A and B: same length, different tokens
# (prompt, response, uid) rows, and the micro-batch size veRL splits them by.
BATCHES = {
    # Groups interleaved; micro-batches of 3 split every group.
    "shuffled_split_groups": (
        [(A, [10, 11, 1], "a"), (B, [12, 13, 14, 15], "b"), (A, [16, 1], "a"),
         (C, [17, 18], "c"), (B, [19], "b"), (A, [20, 21, 22], "a")],
        3,
    ),
    # N = 1, 2, 4; a micro-batch size of 7 on 7 rows: one micro-batch, several groups.
    "ragged_n": (
        [(C, [30, 31], "c"), (A, [32, 33, 34, 1], "a"), (C, [35], "c"), (B, [36, 37], "b"),
         (C, [38, 39, 40, 41], "c"), (A, [42, 1], "a"), (C, [43], "c")],
        7,
    ),
    # Two uids with the same prompt (two dataset rows of one prompt): kept apart, still exact;
    # micro-batches of 2 hold a singleton slice of a group.
    "same_prompt_two_uids": (
        [(A, [50, 51], "a1"), (A, [52], "a2"), (A, [53, 54, 55], "a1"), (B, [56, 57], "b"),
         (A, [58, 1], "a2"), (B, [59], "b")],
        2,
    ),
}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def process_group(tmp_path_factory):
    """veRL's engine all-reduces token counts over the data-parallel group: one gloo process."""
    if dist.is_initialized():
        yield
        return
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture
def engines(monkeypatch):
    run_on_cpu(monkeypatch)
    return engine_pair(tiny_qwen3(0))


def response_part(values, data):
    return no_padding_2_padding(values, data)


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_log_probs_and_entropy_equal_verl_padding_free(engines, batch):
    rows, micro_batch_size = BATCHES[batch]
    data = rollout_batch(rows, torch.Generator().manual_seed(1), micro_batch_size)
    outputs = [engine.forward_backward_batch(data, None, forward_only=True)["model_output"] for engine in engines]
    for key in ("log_probs", "entropy"):
        expected, got = (response_part(output[key], data) for output in outputs)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6, msg=lambda m: f"{key}: {m}")


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("loss_agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_actor_update_loss_and_gradients_equal_verl_padding_free(engines, batch, loss_agg_mode):
    rows, micro_batch_size = BATCHES[batch]
    data = rollout_batch(rows, torch.Generator().manual_seed(2), micro_batch_size)
    config = actor_config(loss_agg_mode=loss_agg_mode, clip_ratio_high=0.28)
    results = []
    for engine in engines:
        engine.module.zero_grad(set_to_none=True)
        output = engine.forward_backward_batch(data, loss_function(config), forward_only=False)
        grads = {name: p.grad.clone() for name, p in engine.module.named_parameters()}
        results.append((torch.tensor(output["loss"]), grads))
    (expected_loss, expected_grads), (loss, grads) = results
    assert loss.numel() == -(-len(rows) // micro_batch_size)  # one loss per micro-batch
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-7)
    assert any(g.abs().max() > 0 for g in expected_grads.values())
    for name, expected in expected_grads.items():
        torch.testing.assert_close(grads[name], expected, rtol=1e-4, atol=1e-7, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_hybrid_model_log_probs_and_entropy_equal_each_row_alone(monkeypatch, batch):
    """A Qwen3.5 (Gated DeltaNet, then gated attention) against the model on each [prompt; response]
    row alone. Not against veRL's padding-free path: on a CPU (without flash-linear-attention) that
    runs the recurrence across the rows it concatenates, so it is not exact for these models."""
    run_on_cpu(monkeypatch)
    model = tiny_qwen3(0, hybrid=True)
    _, packed = engine_pair(model)
    rows, micro_batch_size = BATCHES[batch]
    temperature = 0.8
    data = rollout_batch(rows, torch.Generator().manual_seed(1), micro_batch_size, temperature=temperature)
    output = packed.forward_backward_batch(data, None, forward_only=True)["model_output"]
    with torch.no_grad():
        for b, (prompt, response, _) in enumerate(rows):
            ids = torch.tensor([prompt + response])
            logits = model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1 : -1].float() / temperature
            scores = torch.log_softmax(logits, dim=-1)
            expected = {
                "log_probs": scores.gather(1, ids[0, len(prompt) :, None])[:, 0],
                "entropy": -(scores.exp() * scores).sum(-1),
            }
            for key, want in expected.items():
                got = response_part(output[key], data)[b, : len(response)]
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"row {b} {key}: {m}")


def test_packs_each_micro_batch_by_uid(engines, monkeypatch):
    """The packed stream holds each (micro-batch, uid) prompt once, not once per row."""
    _, packed = engines
    rows, micro_batch_size = BATCHES["ragged_n"]
    data = rollout_batch(rows, torch.Generator().manual_seed(3), micro_batch_size)
    lengths = []
    forward = packed.module.forward

    def spy(*args, dualkv_packed=None, **kwargs):
        lengths.append(dualkv_packed.num_tokens)
        return forward(*args, dualkv_packed=dualkv_packed, **kwargs)

    monkeypatch.setattr(packed.module, "forward", spy)
    packed.forward_backward_batch(data, None, forward_only=True)
    assert lengths == [len(A) + len(B) + len(C) + sum(len(r) for _, r, _ in rows)]


def test_uid_with_different_prompts_is_an_error(engines):
    _, packed = engines
    rows = [(A, [10, 11], "x"), (B, [12], "x")]
    data = rollout_batch(rows, torch.Generator().manual_seed(4), 2)
    with pytest.raises(ValueError, match="uids: uid 'x' maps to rows with different prompts"):
        packed.forward_backward_batch(data, None, forward_only=True)


def test_engine_is_registered_for_this_platform():
    from verl.workers.engine.base import EngineRegistry

    import dualkv.integrations.verl as plugin

    for backend in ("fsdp", "fsdp2"):
        assert EngineRegistry.get_engine_cls("language_model", backend) is plugin.DualKVFSDPEngineWithLMHead
    plugin.register()  # idempotent


def _sequence_parallel_body(rank, world, batch):
    """On each of `world` ranks of one Ulysses group (one data-parallel replica, as veRL holds
    them): the dualkv engine, sequence-parallel, against veRL's padding-free path unsharded."""
    from verl.utils.ulysses import set_ulysses_sequence_parallel_group

    from dualkv.distributed import SequenceShard

    transformer_impl.get_device_id = lambda: "cpu"
    transformer_impl.get_device_name = lambda: "cpu"
    own_groups = [dist.new_group([r]) for r in range(world)]  # the data-parallel group of each rank
    set_ulysses_sequence_parallel_group(dist.group.WORLD)
    plain, packed = engine_pair(tiny_qwen3(0))
    packed.use_ulysses_sp, packed.ulysses_sequence_parallel_size = True, world
    for engine in (plain, packed):
        engine.get_data_parallel_group = lambda: own_groups[rank]
    shards = []
    forward = packed.module.forward

    def spy(*args, dualkv_packed=None, **kwargs):
        shards.append(dualkv_packed)
        return forward(*args, dualkv_packed=dualkv_packed, **kwargs)

    packed.module.forward = spy
    rows, micro_batch_size = BATCHES[batch]
    data = rollout_batch(rows, torch.Generator().manual_seed(5), micro_batch_size)
    config = actor_config()
    outputs = []
    for engine in (plain, packed):
        scores = engine.forward_backward_batch(data, None, forward_only=True)["model_output"]
        update = engine.forward_backward_batch(data, loss_function(config), forward_only=False)
        outputs.append((scores, torch.tensor(update["loss"])))
    assert shards and all(isinstance(s, SequenceShard) and s.local_tokens < s.packed.num_tokens for s in shards)
    for key in ("log_probs", "entropy"):
        expected, got = (no_padding_2_padding(scores[key], data) for scores, _ in outputs)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6, msg=lambda m: f"rank {rank} {key}: {m}")
    torch.testing.assert_close(outputs[1][1], outputs[0][1], rtol=1e-5, atol=1e-7)
    # Each rank holds W times its share of the gradient; their mean is the unsharded gradient
    # (what FSDP's average over the dp x sp ranks makes of it, as for veRL's own Ulysses path).
    for (name, expected), sharded in zip(plain.module.named_parameters(), packed.module.parameters()):
        mean = sharded.grad.clone()
        dist.all_reduce(mean)
        torch.testing.assert_close(mean / world, expected.grad, rtol=1e-4, atol=1e-7, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("batch", ["shuffled_split_groups"])
def test_ulysses_sequence_parallel_equals_verl_unsharded(tmp_path, batch):
    from distributed_support import run_ranks

    run_ranks(2, tmp_path, _sequence_parallel_body, batch)


def test_example_overrides_are_keys_of_verls_config():
    """examples/verl_grpo_dualkv.sh is not run here (GPUs, vLLM); its overrides are at least keys
    of veRL's own trainer config ("+key" would add a new one; the example has none)."""
    import pathlib
    import re

    import verl
    from omegaconf import OmegaConf

    root = pathlib.Path(__file__).resolve().parents[2]
    config = OmegaConf.load(pathlib.Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    keys = re.findall(r"^\s+([+\w.]+)=", (root / "examples" / "verl_grpo_dualkv.sh").read_text(), flags=re.MULTILINE)
    assert "actor_rollout_ref.model.external_lib" in keys
    unknown = []
    for key in keys:
        node = config
        for part in key.split("."):
            # A mandatory value ("???") reads as absent to `in`: look at the keys themselves.
            if not OmegaConf.is_config(node) or part not in list(node.keys()):
                unknown.append(key)
                break
            node = node._get_node(part)
    assert not unknown, f"not keys of veRL's config: {unknown}"


def test_loss_on_prompt_tokens_is_refused(engines):
    """A jagged loss mask over whole rows (veRL's SFT layout) marking prompt tokens would read
    log-probs the packed path leaves at 0."""
    _, packed = engines
    rows, micro_batch_size = BATCHES["ragged_n"]
    data = rollout_batch(rows, torch.Generator().manual_seed(6), micro_batch_size)
    data["loss_mask"] = torch.nested.nested_tensor_from_jagged(
        torch.ones_like(data["input_ids"].values()), offsets=data["input_ids"].offsets()
    )
    with pytest.raises(ValueError, match="loss_mask: marks prompt tokens"):
        packed.forward_backward_batch(data, None, forward_only=True)
