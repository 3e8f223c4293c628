"""The model check (dualkv.token_mixing): every family transformers ships with a layer that mixes
tokens outside the layout is refused, naming the layer class and its path; unknown layers are
judged by what they do (a made-up running sum is refused, the same sum kept within each path and
reading dualkv_layout is accepted); the check runs before the first packed result of a model
called directly, in PackedPolicy and in the TRL and veRL integrations."""

import copy

import pytest
import torch
from models_support import CONFIGS, model_pair
from sweep_support import model_sweep
from transformers import AutoModelForCausalLM

import dualkv
import dualkv.transformers
from dualkv import _model_guard, token_mixing
from dualkv.token_mixing import UnsupportedModelError, check_token_mixing


def _tiny(model_type, seed=0, attention="dualkv"):
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(model_sweep.tiny_config(model_type), attn_implementation=attention)


def _packed():
    return dualkv.pack([[5, 6, 7], [8, 9]], [[[10, 11], [12]], [[13, 14, 15]]])


def _call(model, packed):
    return model(
        input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout, use_cache=False
    )


# model type -> the layer class the refusal names, and where the first one sits. OLMo-hybrid's
# Gated DeltaNet layers are not adapted to the layout (Qwen3.5's and Qwen3-Next's are).
REFUSED_FAMILIES = {
    "olmo_hybrid": r"OlmoHybridGatedDeltaNet at model\.layers\.0\.linear_attn",
    "mamba": r"MambaMixer at backbone\.layers\.0\.mixer",
    "jamba": r"JambaMambaMixer at model\.layers\.0\.mamba",
    "lfm2": r"Lfm2ShortConv at model\.layers\.0\.conv",
    "rwkv": r"RwkvSelfAttention at rwkv\.blocks\.0\.attention",
    "bloom": r"BloomAttention at transformer\.h\.0\.self_attention",
}


@pytest.mark.parametrize("model_type", list(REFUSED_FAMILIES))
def test_families_that_mix_tokens_outside_the_layout_are_refused_naming_the_layer(model_type):
    model = _tiny(model_type)
    with pytest.raises(UnsupportedModelError, match=REFUSED_FAMILIES[model_type]) as error:
        check_token_mixing(model)
    assert "docs/models.md" in str(error.value)
    assert not token_mixing.is_checked(model)


# The hybrid families whose Gated DeltaNet layers dualkv adapts: accepted because they behave.
@pytest.mark.parametrize("model_type", ["qwen3_5_text", "qwen3_5_moe_text", "qwen3_next"])
def test_adapted_hybrid_families_pass_the_check(model_type):
    model = _tiny(model_type)
    check_token_mixing(model)
    assert token_mixing.is_checked(model)


def test_a_model_called_directly_is_checked_before_its_first_packed_result():
    model = _tiny("mamba")
    with pytest.raises(UnsupportedModelError, match="MambaMixer"):
        _call(model, _packed())
    model(input_ids=_packed().input_ids)  # N-copy calls (no layout) are not the check's business


def test_a_model_whose_code_picks_attention_classes_by_name_is_refused_at_construction():
    with pytest.raises(UnsupportedModelError, match="FalconForCausalLM's modeling code picks its attention layer"):
        _tiny("falcon")


def test_a_model_whose_layers_drop_the_layout_is_refused_naming_the_layer_and_its_caller():
    model = _tiny("stablelm")
    with pytest.raises(
        UnsupportedModelError,
        match=r"StableLmAttention at model\.layers\.0\.self_attn is called without the dualkv_layout.*"
        r"StableLmDecoderLayer does not pass",
    ):
        _call(model, _packed())


def test_a_model_whose_forward_fails_on_a_packed_batch_is_refused_naming_the_failure():
    model = _tiny("mpt")
    with pytest.raises(UnsupportedModelError, match=r"MptForCausalLM: its forward pass fails on a packed batch \("):
        _call(model, _packed())


class RunningSum(torch.nn.Module):
    """A made-up layer no list of names knows: adds the running sum over the packed tokens."""

    def forward(self, hidden):
        return hidden + 0.1 * hidden.cumsum(dim=1)


class PathRunningSum(torch.nn.Module):
    """The same sum kept within each path (a prompt row: its prompt so far; a response row: its
    whole prompt plus its response so far), reading the layout from the decoder layer's call."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, hidden_states, *args, dualkv_layout=None, **kwargs):
        hidden = self.layer(hidden_states, *args, dualkv_layout=dualkv_layout, **kwargs)
        return hidden + 0.1 * _path_sums(hidden, dualkv_layout)


def _path_sums(hidden, layout):
    sums, start = [], 0
    for prompt, responses in zip(layout.prompt_lengths, layout.response_lengths):
        prompt_sum = hidden[:, start : start + prompt].cumsum(dim=1)
        sums.append(prompt_sum)
        start += prompt
        for length in responses:
            sums.append(prompt_sum[:, -1:] + hidden[:, start : start + length].cumsum(dim=1))
            start += length
    return torch.cat(sums, dim=1)


class WithRunningSum(torch.nn.Module):
    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp
        self.mixer = RunningSum()

    def forward(self, hidden):
        return self.mixer(self.mlp(hidden))


def test_an_unknown_layer_that_mixes_tokens_is_refused_by_what_it_does():
    model, _ = model_pair("qwen3")
    model.model.layers[1].mlp = WithRunningSum(model.model.layers[1].mlp)
    with pytest.raises(UnsupportedModelError, match=r"RunningSum at model\.layers\.1\.mlp\.mixer") as error:
        check_token_mixing(model)
    assert "Qwen3MLP" not in str(error.value) and "WithRunningSum" not in str(error.value)


def test_a_layer_that_reads_the_layout_and_keeps_paths_apart_is_accepted_and_exact():
    """The extension point: a layer dualkv adapts passes because it behaves correctly."""
    model, reference = model_pair("qwen3")
    model.model.layers[0] = PathRunningSum(model.model.layers[0])
    check_token_mixing(model)  # no error
    packed = _packed()
    logits = _call(model, packed).logits[0]
    # Each [prompt; response] alone, the same layer on a one-path layout: equal rows.
    start = 0
    for prompt, responses in zip([[5, 6, 7], [8, 9]], [[[10, 11], [12]], [[13, 14, 15]]]):
        for index, response in enumerate(responses):
            alone = dualkv.pack([prompt], [[response]])
            rows = _call(model, alone).logits[0]
            expected = rows if index == 0 else rows[len(prompt) :]
            torch.testing.assert_close(logits[start : start + len(expected)], expected, rtol=0, atol=1e-5)
            start += len(expected)
    del reference


def test_moe_and_dense_models_pass_and_are_checked_once():
    for name in ("qwen3", "qwen3_moe"):
        model, _ = model_pair(name)
        check_token_mixing(model)
        assert token_mixing.is_checked(model) and token_mixing.is_checked(model.model)
        # The guard of the first packed forward is gone (a compiled model needs no graph break for
        # it); what stays is the shape check of packed input_ids, plain Python on static shapes.
        hooks = [hook for module in model.modules() for hook in module._forward_pre_hooks.values()]
        assert token_mixing._check_before_packed_forward not in hooks
        assert set(hooks) == {_model_guard._refuse_unbatched_input_ids}


def test_the_check_can_be_skipped_by_name(monkeypatch):
    model = _tiny("mamba")
    monkeypatch.setenv(token_mixing.MODEL_CHECK_VARIABLE, "0")
    _call(model, _packed())  # runs, unchecked: the caller's choice
    other = _tiny("mamba")
    token_mixing.mark_token_mixing_checked(other)
    monkeypatch.delenv(token_mixing.MODEL_CHECK_VARIABLE)
    _call(other, _packed())


def test_a_model_on_the_meta_device_is_a_clear_error():
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(CONFIGS["qwen3"](), attn_implementation="dualkv")
    with pytest.raises(ValueError, match="model: Qwen3ForCausalLM has parameters on the meta device"):
        check_token_mixing(model)


def test_the_check_leaves_the_model_and_the_random_state_as_they_were():
    model, _ = model_pair("qwen3")
    model.train()
    before = copy.deepcopy(model.state_dict())
    state = torch.random.get_rng_state()
    check_token_mixing(model)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert model.training and all(module.training for module in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_packed_policy_refuses_a_model_that_mixes_tokens_outside_the_layout():
    from dualkv.training import PackedPolicy

    with pytest.raises(UnsupportedModelError, match="MambaMixer"):
        PackedPolicy(_tiny("mamba"))


def test_verl_engine_refuses_and_trusts_rank_zero_for_meta_copies():
    pytest.importorskip("verl", reason="needs verl (pip install dualkv[verl])")
    from dualkv.integrations.verl.engine import enable_packed_scoring

    with pytest.raises(UnsupportedModelError, match="MambaMixer"):
        enable_packed_scoring(_tiny("mamba", attention="eager"))
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(CONFIGS["qwen3"](), attn_implementation="sdpa")
    assert token_mixing.is_checked(enable_packed_scoring(meta))


def test_trl_trainer_refuses_a_model_that_mixes_tokens_outside_the_layout(tmp_path):
    pytest.importorskip("trl", reason="needs trl (pip install dualkv[trl])")
    from trl import GRPOConfig
    from trl_support import length_reward, prompts_dataset, tokenizer

    from dualkv.integrations.trl import DualKVGRPOTrainer

    config = model_sweep.tiny_config("mamba")
    config.vocab_size = 64
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "tiny-mamba")
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2, max_completion_length=4,
        use_cpu=True, report_to=[], save_strategy="no", beta=0.0, model_init_kwargs={"attn_implementation": "eager"},
    )
    with pytest.raises(UnsupportedModelError, match="MambaMixer"):
        DualKVGRPOTrainer(
            model=str(tmp_path / "tiny-mamba"), reward_funcs=length_reward, args=args,
            train_dataset=prompts_dataset(["w2 w3"]), processing_class=tokenizer(),
        )
