"""Inputs a user easily gets wrong are refused with the real cause: the argument that is wrong and
how to pass it, not a symptom inside transformers or a neighbouring argument."""

import re

import pytest
import torch
from models_support import model_pair

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")

PROMPTS = [[5, 17, 42, 8]]
RESPONSES = [[[11, 12, 13], [14, 15], [16]]]


def _packed(prompts=PROMPTS, responses=RESPONSES):
    return dualkv.pack(prompts, responses)


def _model_inputs(packed):
    return dict(input_ids=packed.input_ids, position_ids=packed.position_ids, use_cache=False)


def test_layout_of_another_pack_call_is_named_not_the_position_ids():
    model, _ = model_pair("qwen3")
    packed, other = _packed(), _packed([[5, 17, 42]], [[[11, 12, 13], [14, 15]]])
    assert other.num_tokens != packed.num_tokens
    message = re.escape(
        f"dualkv_layout: describes {packed.num_tokens} packed tokens but the model's input has {other.num_tokens}: "
        "the layout does not belong to these input ids (was it made by another pack() call?)"
    )
    with pytest.raises(ValueError, match=message):
        model(**_model_inputs(other), dualkv_layout=packed.layout)


def test_layout_of_another_pack_call_with_as_many_tokens_names_both_arguments():
    """Same token count, other segments: the position ids and the layout disagree, and either may
    be the stranger, so the message asks for both from one packed batch."""
    model, _ = model_pair("qwen3")
    packed, other = _packed(), _packed([[5, 17, 42, 8, 9]], [[[11, 12], [14, 15], [16]]])
    assert other.num_tokens == packed.num_tokens
    with pytest.raises(ValueError, match=r"position_ids and dualkv_layout must come from one packed batch"):
        model(**_model_inputs(other), dualkv_layout=packed.layout)


@pytest.mark.parametrize("position_ids", ["packed", "packed 1-D", "none"])
def test_one_dimensional_input_ids_are_refused_before_transformers_fails_on_them(position_ids):
    model, _ = model_pair("qwen3")
    packed = _packed()
    inputs = dict(input_ids=packed.input_ids[0], use_cache=False, dualkv_layout=packed.layout)
    if position_ids == "packed":
        inputs["position_ids"] = packed.position_ids
    if position_ids == "packed 1-D":  # transformers' mask preprocessing fails on these before dualkv's mask builder
        inputs["position_ids"] = packed.position_ids[0]
    message = re.escape(
        "input_ids: must be (1, T), the packed batch as one sequence (packed.input_ids); "
        f"got {packed.num_tokens} sequences"
    )
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_rows_of_the_n_copy_batch_are_refused_naming_input_ids():
    model, _ = model_pair("qwen3")
    packed = _packed()
    rows = packed.input_ids.expand(3, -1)
    with pytest.raises(ValueError, match=re.escape("input_ids: must be (1, T)") + ".* got 3 sequences"):
        model(
            input_ids=rows, position_ids=packed.position_ids.expand(3, -1), dualkv_layout=packed.layout, use_cache=False
        )


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_head_major_tensors_get_the_axis_order_hint(name, make_qkv):
    packed = _packed()
    tensors = dict(zip("qkv", (t.detach() for t in make_qkv(packed.num_tokens, 4, 2, 8))))
    tensors[name] = tensors[name].transpose(0, 1)
    message = re.escape(
        f"dualkv: invalid argument '{name}.tokens': must equal the layout's total_tokens ({packed.num_tokens}), "
        f"got {tensors[name].shape[0]}"
    ) + f".*pass a \\(heads, tokens, head_dim\\) one as {name}\\.transpose\\(0, 1\\)"
    with pytest.raises(ValueError, match=message):
        dualkv.attention(tensors["q"], tensors["k"], tensors["v"], packed.layout)


def test_a_wrong_token_count_without_a_transposed_axis_gets_the_plain_rule(make_qkv):
    packed = _packed()
    q, k, v = (t.detach() for t in make_qkv(packed.num_tokens, 4, 2, 8))
    with pytest.raises(ValueError, match=r"'q\.tokens': must equal the layout's total_tokens") as raised:
        dualkv.attention(q[:-1], k[:-1], v[:-1], packed.layout)
    assert "transpose" not in str(raised.value)

