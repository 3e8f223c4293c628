"""The pieces both trainer integrations stand on: the "dualkv_or_<attention>" dispatch (ordinary
calls unchanged, packed calls on dualkv, also in a gradient-checkpointing recompute) and the
`model(dualkv_packed=...)` scoring entry through the wrappers trainers use (DDP, FSDP2)."""

import pytest
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from trl_support import tiny_qwen3

import dualkv
from dualkv.integrations.attention import use_packed_attention
from dualkv.integrations.scoring import install_packed_scoring

PROMPTS = [[2, 3, 4, 5], [6, 7]]
RESPONSES = [[[10, 11, 12], [13]], [[14, 15], [16, 17, 18], [19]]]


def scoring_model(seed=0):
    model = tiny_qwen3(seed)
    use_packed_attention(model)
    install_packed_scoring(model, temperature=0.9)
    return model


def ncopy_logprobs(model, temperature=0.9):
    """Per response, log p(token) from an ordinary forward over [prompt; response]."""
    rows = []
    for prompt, group in zip(PROMPTS, RESPONSES):
        for response in group:
            ids = torch.tensor([prompt + response])
            logits = model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1 : -1] / temperature
            rows.append(torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(response)[:, None])[:, 0])
    width = max(len(r) for r in rows)
    return torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    if dist.is_initialized():
        yield
        return
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path_factory.mktemp('gloo') / 'store'}", rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()


def test_ordinary_calls_keep_the_previous_attention():
    reference, model = tiny_qwen3(0), scoring_model(0)
    assert model.config._attn_implementation == "dualkv_or_sdpa"
    ids = torch.tensor([[2, 3, 4, 5, 6]])
    torch.testing.assert_close(model(input_ids=ids).logits, reference(input_ids=ids).logits, rtol=0, atol=0)
    generated = model.generate(ids, max_new_tokens=4, do_sample=False)
    torch.testing.assert_close(generated, reference.generate(ids, max_new_tokens=4, do_sample=False))


def test_packed_scoring_equals_ncopy_forward():
    model = scoring_model()
    packed = dualkv.pack(PROMPTS, RESPONSES)
    logprobs, entropy = model(dualkv_packed=packed)
    expected = ncopy_logprobs(model)
    torch.testing.assert_close(logprobs, expected, rtol=1e-5, atol=1e-6)
    assert entropy.shape == logprobs.shape and bool((entropy[packed.response_mask] > 0).all())


def test_gradient_checkpointing_recomputes_with_dualkv():
    """Backward re-runs each layer with the layout it was called with, not the ordinary attention."""
    plain, checkpointed = scoring_model(), scoring_model()
    checkpointed.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    checkpointed.train()
    plain.train()
    packed = dualkv.pack(PROMPTS, RESPONSES)
    for model in (plain, checkpointed):
        model(dualkv_packed=packed)[0].sum().backward()
    for (name, a), b in zip(plain.named_parameters(), checkpointed.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-7, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("wrapper", ["ddp", "fsdp2"])
def test_scoring_through_trainer_wrappers(process_group, wrapper):
    reference, model = scoring_model(), scoring_model()
    if wrapper == "ddp":
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
    else:
        for layer in model.model.layers:
            fully_shard(layer)
        wrapped = fully_shard(model)
    packed = dualkv.pack(PROMPTS, RESPONSES)
    expected = reference(dualkv_packed=packed)[0]
    got = wrapped(dualkv_packed=packed)[0]
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    expected.sum().backward()
    got.sum().backward()
    for (name, a), b in zip(reference.named_parameters(), model.parameters()):
        grad = b.grad.full_tensor() if hasattr(b.grad, "full_tensor") else b.grad
        torch.testing.assert_close(grad, a.grad, rtol=1e-5, atol=1e-7, msg=lambda m: f"{name}: {m}")


def test_logit_transforms_and_head_bias_are_refused():
    model = tiny_qwen3(0)
    use_packed_attention(model)
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ValueError, match="model.config.final_logit_softcapping: 30.0 transforms the logits"):
        install_packed_scoring(model)
    model.config.final_logit_softcapping = None
    model.lm_head.bias = torch.nn.Parameter(torch.zeros(model.config.vocab_size))
    with pytest.raises(ValueError, match="LM head has a bias"):
        install_packed_scoring(model)


def test_packed_call_refuses_other_arguments():
    model = scoring_model()
    packed = dualkv.pack(PROMPTS, RESPONSES)
    with pytest.raises(ValueError, match=r"dualkv_packed: .*\['input_ids'\]"):
        model(dualkv_packed=packed, input_ids=packed.input_ids)


def test_scoring_needs_the_dispatching_attention():
    with pytest.raises(ValueError, match="use_packed_attention"):
        install_packed_scoring(tiny_qwen3(0))
