"""The Gated DeltaNet layers of transformers' hybrid models under dualkv: which layers are adapted,
that a call without a layout runs transformers' own functions unchanged, that a layer called on its
own with the layout respects it (rows a segment cannot see stay bitwise the same when its inputs
change), and the clear errors. Whole models against the N-copy batch: test_models.py."""

import sys

import pytest
import torch
from models_support import HYBRID_MODELS, model_pair, rollouts

import dualkv
import dualkv.transformers  # noqa: F401  (registers "dualkv", adapts the Gated DeltaNet layers)
from dualkv import _gated_deltanet
from dualkv.distributed import SequenceParallelLayout

SHAPES = [(5, [3, 1, 4]), (2, [2, 3]), (6, [1])]


def test_the_three_families_gated_deltanet_layers_are_adapted_once():
    assert _gated_deltanet.install() == ["Qwen3NextGatedDeltaNet", "Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet"]
    for module_name in _gated_deltanet.GATED_DELTANET_MODULES:
        module = sys.modules[module_name]
        for name in ("causal_conv1d_fn", "torch_chunk_gated_delta_rule"):
            function = getattr(module, name)
            assert function._dualkv_packed and not getattr(function.__wrapped__, "_dualkv_packed", False)


@pytest.mark.parametrize("module_name", list(_gated_deltanet.GATED_DELTANET_MODULES))
def test_calls_without_a_layout_are_transformers_own(module_name):
    module = sys.modules[module_name]
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 9, 3, 8, generator=generator) for _ in range(3))
    g, beta = -torch.rand(2, 9, 3, generator=generator), torch.rand(2, 9, 3, generator=generator)
    x, weight = torch.randn(2, 6, 9, generator=generator), torch.randn(6, 4, generator=generator)
    for name, args, kwargs in (
        ("torch_chunk_gated_delta_rule", (q, k, v), dict(g=g, beta=beta, use_qk_l2norm_in_kernel=True)),
        ("causal_conv1d_fn", (x, weight), dict(activation="silu")),
    ):
        function = getattr(module, name)
        got, expected = function(*args, **kwargs), function.__wrapped__(*args, **kwargs)
        for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, expected))):
            assert (a is None and b is None) or torch.equal(a, b)


def _layer_call(name):
    """A model's first Gated DeltaNet layer and the keyword arguments of its call on a packed batch."""
    model, _ = model_pair(name)
    layer = model.model.layers[0].linear_attn
    packed = dualkv.pack(*rollouts(2, SHAPES))
    hidden = torch.randn(1, packed.num_tokens, model.config.hidden_size, generator=torch.Generator().manual_seed(1))
    return layer, hidden, packed.layout


@pytest.mark.parametrize("name", HYBRID_MODELS)
def test_a_layer_called_alone_respects_the_layout(name):
    """What a behavioural check of the model sees: the layer replayed with one segment's rows
    changed gives bitwise the same rows wherever that segment is not visible, and changes the rows
    that see it."""
    layer, hidden, layout = _layer_call(name)
    with torch.no_grad():
        base = layer(hidden, dualkv_layout=layout, use_cache=False)
        assert torch.equal(layer(hidden, dualkv_layout=layout, use_cache=False), base)
        segments, groups = layout.segment_ids, layout.group_ids
        prompt_of_group_0, response_1_of_group_0 = 0, 2
        for segment, sees_it in (
            (prompt_of_group_0, groups == 0),
            (response_1_of_group_0, segments == response_1_of_group_0),
        ):
            changed = hidden.clone()
            changed[0, segments == segment] += 1.0
            out = layer(changed, dualkv_layout=layout, use_cache=False)
            assert torch.equal(out[0, ~sees_it], base[0, ~sees_it])
            assert (out[0, sees_it] != base[0, sees_it]).any(dim=-1).all()


def test_errors_name_the_argument():
    layer, hidden, layout = _layer_call("qwen3_5")
    with pytest.raises(TypeError, match="dualkv_layout: expected a dualkv.Layout or SequenceParallelLayout, got"):
        layer(hidden, dualkv_layout=(1, 2))
    with pytest.raises(TypeError, match="dualkv_layout.layout: expected a dualkv.Layout"):
        layer(hidden, dualkv_layout=SequenceParallelLayout(None, None))
    with pytest.raises(ValueError, match="Qwen3_5GatedDeltaNet: 12 tokens for a layout of"):
        layer(hidden[:, :12], dualkv_layout=layout)
    with pytest.raises(ValueError, match="cu_seq_lens_q: the packed layout defines the sequences"):
        layer(hidden, dualkv_layout=layout, cu_seq_lens_q=torch.tensor([0, layout.num_tokens]))


def test_a_recurrent_cache_is_refused():
    model, _ = model_pair("qwen3_5")
    packed = dualkv.pack(*rollouts(3, SHAPES))
    with pytest.raises(ValueError, match="use_cache: must be False with dualkv_layout .*Qwen3_5GatedDeltaNet"):
        model(input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout)
