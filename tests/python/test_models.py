"""Whole transformers models on the packed batch ("dualkv") against the N-copy batch ("eager"/"sdpa").

Per response: log-probs within 1e-5, the GRPO loss equal, every parameter's gradient within 1e-4
(relative, in norm) of the N-copy computation. fp32, tiny random-init models, no downloads.
"""

import pathlib
import re

import pytest
import torch
from models_support import CONFIGS, grpo_loss, model_pair, right_padded_rows, rollouts
from transformers import AutoModelForCausalLM
from transformers.masking_utils import create_causal_mask

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")


# Several groups with different P and N, ragged R (including 1).
SHAPES = [(7, [3, 5, 1]), (2, [4, 2]), (5, [6]), (1, [2, 1, 3, 2])]
ROOT = pathlib.Path(__file__).resolve().parents[2]
QUICK_STARTS = [ROOT / "docs" / "python.md", ROOT / "docs" / "trees.md", ROOT / "docs" / "recurrent.md", ROOT / "README.md"]


def _ncopy_logprobs(logits, input_ids, prompt_lengths, attention_mask):
    """Naive per-row log-probs: token c of row b scored by log_softmax(logits[b, c - 1]) in fp32."""
    per_response = []
    for b in range(input_ids.shape[0]):
        length = int(attention_mask[b].sum())
        log_p = torch.log_softmax(logits[b].float(), dim=-1)
        per_response.append(torch.stack([log_p[c - 1, input_ids[b, c]] for c in range(int(prompt_lengths[b]), length)]))
    out = torch.zeros(len(per_response), max(v.numel() for v in per_response))
    return out.index_put(
        (
            torch.cat([torch.full((v.numel(),), i) for i, v in enumerate(per_response)]),
            torch.cat([torch.arange(v.numel()) for v in per_response]),
        ),
        torch.cat(per_response),
    )





def _assert_gradients_match(packed_model, reference_model):
    for (name, p), (_, r) in zip(packed_model.named_parameters(), reference_model.named_parameters()):
        assert (p.grad is None) == (r.grad is None), name
        if r.grad is None:
            continue
        error = (p.grad - r.grad).norm() / r.grad.norm().clamp(min=1e-30)
        assert error <= 1e-4, f"{name}: relative gradient error {float(error):.2e}"


@pytest.mark.parametrize(
    "name, reference_attention",
    [(name, "eager") for name in CONFIGS] + [("qwen3", "sdpa")],
)
def test_packed_model_equals_ncopy_batch(name, reference_attention):
    packed_model, reference_model = model_pair(name, reference_attention)
    prompts, responses = rollouts(1, SHAPES)
    input_ids, attention_mask, group_ids, prompt_lengths = right_padded_rows(prompts, responses)

    reference_logits = reference_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    reference_logprobs = _ncopy_logprobs(reference_logits, input_ids, prompt_lengths, attention_mask)
    reference_loss = grpo_loss(reference_logprobs, dualkv.pack(prompts, responses), seed=2)
    reference_loss.backward()

    packed, row_map = dualkv.pack_rows(input_ids, attention_mask, group_ids, prompt_lengths=prompt_lengths)
    assert packed.num_tokens < int(attention_mask.sum())  # the prompts really are stored once
    logits = packed_model(
        input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout, use_cache=False
    ).logits
    logprobs = dualkv.response_logprobs(logits, packed)
    loss = grpo_loss(logprobs, packed, seed=2)
    loss.backward()

    torch.testing.assert_close(logprobs, reference_logprobs, rtol=0, atol=1e-5)
    torch.testing.assert_close(loss, reference_loss, rtol=1e-5, atol=1e-7)
    _assert_gradients_match(packed_model, reference_model)
    # Back in the trainer's layout, the values sit on the response tokens of the N-copy rows.
    rows = dualkv.unpack_to_rows(logprobs.detach(), row_map)
    assert torch.equal(rows != 0, (torch.arange(input_ids.shape[1]) >= prompt_lengths[:, None]) & attention_mask.bool())


def test_hidden_state_log_probs_on_a_model_equal_logits_log_probs():
    packed_model, _ = model_pair("qwen3")
    prompts, responses = rollouts(3, SHAPES)
    packed = dualkv.pack(prompts, responses)
    inputs = dict(
        input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout, use_cache=False
    )
    hidden = packed_model.model(**inputs).last_hidden_state
    from_hidden = dualkv.response_logprobs_from_hidden(hidden, packed_model.lm_head.weight, packed, chunk_rows=5)
    from_hidden.sum().backward()
    hidden_grads = [p.grad.clone() for p in packed_model.parameters()]
    packed_model.zero_grad()
    from_logits = dualkv.response_logprobs(packed_model(**inputs).logits, packed)
    from_logits.sum().backward()
    torch.testing.assert_close(from_hidden, from_logits, rtol=0, atol=1e-5)
    for got, expected in zip(hidden_grads, (p.grad for p in packed_model.parameters())):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)


def test_no_attention_mask_is_built_for_dualkv():
    config = CONFIGS["llama"]()
    config._attn_implementation = "dualkv"
    packed = dualkv.pack(*rollouts(4, SHAPES))
    embeds = torch.zeros(1, packed.num_tokens, config.hidden_size)
    assert create_causal_mask(config, embeds, None, None, position_ids=packed.position_ids) is None
    assert create_causal_mask(config, embeds, torch.ones(1, packed.num_tokens), None) is None


def _packed_inputs():
    packed = dualkv.pack(*rollouts(5, SHAPES))
    return packed, dict(input_ids=packed.input_ids, position_ids=packed.position_ids, use_cache=False)


def test_missing_layout_is_a_clear_error():
    model, _ = model_pair("qwen2")
    _, inputs = _packed_inputs()
    with pytest.raises(ValueError, match="dualkv_layout"):
        model(**inputs)


def test_sliding_window_is_refused():
    config = CONFIGS["qwen2"]()
    config.use_sliding_window, config.sliding_window, config.max_window_layers = True, 4, 0
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    model = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv")
    packed, inputs = _packed_inputs()
    with pytest.raises(ValueError, match="sliding_window"):
        model(**inputs, dualkv_layout=packed.layout)


def _windowed_pair(window):
    configs = []
    for _ in range(2):
        config = CONFIGS["qwen2"]()
        config.use_sliding_window, config.sliding_window, config.max_window_layers = True, window, 0
        config.layer_types = ["sliding_attention"] * config.num_hidden_layers
        configs.append(config)
    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(configs[0], attn_implementation="eager")
    model = AutoModelForCausalLM.from_config(configs[1], attn_implementation="dualkv")
    model.load_state_dict(reference.state_dict())
    return model, reference


def test_sliding_window_covering_every_path_runs_and_equals_the_ncopy_batch():
    """SHAPES' longest path is 7 + 5 = 12 tokens: a window of 12 cuts nothing, on either side."""
    model, reference = _windowed_pair(12)
    prompts, responses = rollouts(6, SHAPES)
    packed = dualkv.pack(prompts, responses)
    assert packed.layout.longest_path == 12
    logits = model(input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout,
                   use_cache=False).logits
    input_ids, attention_mask, _, prompt_lengths = right_padded_rows(prompts, responses)
    expected = _ncopy_logprobs(reference(input_ids=input_ids, attention_mask=attention_mask).logits, input_ids,
                               prompt_lengths, attention_mask)
    torch.testing.assert_close(dualkv.response_logprobs(logits, packed), expected, rtol=0, atol=1e-5)


def test_sliding_window_shorter_than_a_path_is_refused_naming_the_window_and_the_path():
    model, _ = _windowed_pair(11)
    packed, inputs = _packed_inputs()
    with pytest.raises(ValueError, match=r"sliding_window: a window of 11 tokens is shorter than this batch's longest "
                                         r"path \(12 tokens"):
        model(**inputs, dualkv_layout=packed.layout)


def test_attention_dropout_is_refused_in_training():
    config = CONFIGS["llama"]()
    config.attention_dropout = 0.1
    model = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv").train()
    packed, inputs = _packed_inputs()
    with pytest.raises(ValueError, match="dropout"):
        model(**inputs, dualkv_layout=packed.layout)


def test_prepared_4d_mask_is_refused():
    model, _ = model_pair("llama")
    packed, inputs = _packed_inputs()
    mask = torch.zeros(1, 1, packed.num_tokens, packed.num_tokens)
    with pytest.raises(ValueError, match="attention_mask"):
        model(**inputs, attention_mask=mask, dualkv_layout=packed.layout)


def test_missing_position_ids_is_a_clear_error():
    """transformers would use 0..T-1, placing every response after all earlier ones."""
    model, _ = model_pair("qwen3")
    packed, _ = _packed_inputs()
    with pytest.raises(ValueError, match="position_ids: must be the packed layout's positions"):
        model(input_ids=packed.input_ids, dualkv_layout=packed.layout, use_cache=False)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_wrong_position_ids_are_a_clear_error(name):
    model, _ = model_pair(name)
    packed, inputs = _packed_inputs()
    inputs["position_ids"] = packed.position_ids + 1
    with pytest.raises(ValueError, match="position_ids: .* at packed token 0, where the layout has 0"):
        model(**inputs, dualkv_layout=packed.layout)


def test_position_ids_changed_in_place_are_checked_again():
    model, _ = model_pair("llama")
    packed, inputs = _packed_inputs()
    inputs["position_ids"] = packed.position_ids.clone()
    model(**inputs, dualkv_layout=packed.layout)
    inputs["position_ids"][0, -1] += 1
    with pytest.raises(ValueError, match="position_ids"):
        model(**inputs, dualkv_layout=packed.layout)


def test_attention_function_needs_position_ids_and_a_layout():
    packed, _ = _packed_inputs()
    model, _ = model_pair("llama")
    attention_layer = model.model.layers[0].self_attn
    q = torch.zeros(1, 4, packed.num_tokens, 16)
    k = v = torch.zeros(1, 2, packed.num_tokens, 16)
    with pytest.raises(ValueError, match="position_ids: this model does not pass position ids"):
        dualkv.transformers.dualkv_attention_forward(attention_layer, q, k, v, None, dualkv_layout=packed.layout)
    with pytest.raises(TypeError, match="dualkv_layout: expected a dualkv.Layout or SequenceParallelLayout, got tuple"):
        dualkv.transformers.dualkv_attention_forward(attention_layer, q, k, v, None, dualkv_layout=(1, 2))


def test_inference_mode_position_ids_are_checked_in_every_layer():
    """Inference tensors have no version counter, so nothing can be cached for them."""
    model, _ = model_pair("llama")
    packed, inputs = _packed_inputs()
    with torch.inference_mode():
        inputs["position_ids"] = packed.position_ids.clone()
        expected = model(**inputs, dualkv_layout=packed.layout).logits
        inputs["position_ids"][0, -1] += 1
        with pytest.raises(ValueError, match="position_ids"):
            model(**inputs, dualkv_layout=packed.layout)
    assert expected.isfinite().all()


def test_padding_2d_mask_is_refused():
    model, _ = model_pair("qwen3")
    packed, inputs = _packed_inputs()
    mask = torch.ones(1, packed.num_tokens, dtype=torch.long)
    mask[0, 3] = 0
    with pytest.raises(ValueError, match="attention_mask: must be None .* got a mask with zeros"):
        model(**inputs, attention_mask=mask, dualkv_layout=packed.layout)


def test_all_ones_2d_mask_changes_nothing():
    model, _ = model_pair("qwen2")
    packed, inputs = _packed_inputs()
    expected = model(**inputs, dualkv_layout=packed.layout).logits
    mask = torch.ones(1, packed.num_tokens, dtype=torch.long)
    torch.testing.assert_close(model(**inputs, attention_mask=mask, dualkv_layout=packed.layout).logits, expected)


@pytest.mark.parametrize("document", QUICK_STARTS, ids=lambda path: path.name)
def test_quick_start_runs_as_written(document, capsys):
    """The blocks run in order as one script, and print what their `# prints:` comments say, so a
    newcomer can tell that it worked."""
    blocks = re.findall(r"```python\n(.*?)```", document.read_text(), flags=re.S)
    assert blocks, f"{document} has no python block"
    script = "\n".join(blocks)
    exec(compile(script, str(document), "exec"), {})
    expected = re.findall(r"^# prints: (.*)$", script, flags=re.MULTILINE)
    assert expected, f"{document} shows no output"
    assert capsys.readouterr().out.splitlines() == expected
