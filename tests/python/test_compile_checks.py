"""Under torch.compile (the default inductor backend, on the CPU) what eager mode checks is still
checked: position ids against the layout and 2-D masks with zeros fail the compiled run itself (on
the device), and a model is checked for token mixing before its first compiled packed result.
One one-layer model, compiled once for the whole module: compiling is what takes the time."""

import pytest
import torch
from models_support import CONFIGS
from sweep_support import model_sweep
from transformers import AutoModelForCausalLM

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv.token_mixing import UnsupportedModelError, check_token_mixing

PROMPTS = [[5, 6, 7], [8, 9]]
RESPONSES = [[[10, 11], [12]], [[13, 14, 15]]]


@pytest.fixture(scope="module")
def models():
    config = CONFIGS["qwen3"]()
    config.num_hidden_layers = 1
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="dualkv").eval()
    check_token_mixing(model)  # before compiling: nothing of the check is left in the compiled graph
    return model, torch.compile(model)


def _inputs(**overrides):
    packed = dualkv.pack(PROMPTS, RESPONSES)
    inputs = dict(input_ids=packed.input_ids, position_ids=packed.position_ids, dualkv_layout=packed.layout,
                  use_cache=False)
    return {**inputs, **overrides}


def test_compiled_model_equals_eager(models):
    eager, compiled = models
    with torch.no_grad():
        torch.testing.assert_close(compiled(**_inputs()).logits, eager(**_inputs()).logits, rtol=1e-5, atol=1e-6)


def test_compiled_run_with_position_ids_that_are_not_the_layouts_fails(models):
    """The N-copy numbering (0..T-1 over the stream) is the likely mistake; eager mode refuses it too."""
    _, compiled = models
    tokens = _inputs()["input_ids"].shape[1]
    with torch.no_grad(), pytest.raises(RuntimeError, match="position_ids: must be the packed layout's positions"):
        compiled(**_inputs(position_ids=torch.arange(tokens)[None]))


def test_compiled_run_with_a_padding_mask_fails(models):
    _, compiled = models
    mask = torch.ones_like(_inputs()["input_ids"])
    mask[0, 3] = 0
    with torch.no_grad(), pytest.raises(RuntimeError, match="attention_mask: must be None .* got a mask with zeros"):
        compiled(**_inputs(attention_mask=mask))


def test_compiled_model_is_checked_before_its_first_packed_result():
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(model_sweep.tiny_config("mamba"), attn_implementation="dualkv")
    with torch.no_grad(), pytest.raises(UnsupportedModelError, match="MambaMixer"):
        torch.compile(model)(**_inputs())
