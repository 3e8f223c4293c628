"""The model check on CUDA in bf16, through the CUDA attention kernels: the gradients of the
rows a layout hides come out exactly zero there too (no model is refused that runs exactly), and
a layer that mixes tokens is still found."""

import pytest
import torch
from models_support import CONFIGS
from test_token_mixing import WithRunningSum
from transformers import AutoModelForCausalLM

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv.token_mixing import UnsupportedModelError, check_token_mixing

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not dualkv.cuda_compiled(), reason="needs a GPU and dualkv's CUDA kernels"
)


def _model(name, dtype=torch.bfloat16):
    config = CONFIGS[name]()
    config.head_dim = 64  # compiled for the CUDA kernels (the tiny configs' 16 is not)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="dualkv").to("cuda", dtype)


@pytest.mark.parametrize("name", ["qwen3", "qwen3_moe", "llama"])
def test_models_that_keep_to_the_layout_pass_on_cuda(name):
    check_token_mixing(_model(name))


def test_a_layer_that_mixes_tokens_is_refused_on_cuda():
    model = _model("qwen3")
    model.model.layers[1].mlp = WithRunningSum(model.model.layers[1].mlp)
    with pytest.raises(UnsupportedModelError, match=r"RunningSum at model\.layers\.1\.mlp\.mixer"):
        check_token_mixing(model)


def test_an_fp32_model_is_checked_on_cuda_and_its_fp32_calls_are_refused():
    """fp32 master weights on CUDA (FSDP2's mixed precision computes in bf16 later): the check
    passes, and a direct fp32 call is still the operator's clear error, not a silent cast."""
    model = _model("qwen3", torch.float32)
    check_token_mixing(model)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    layout = dualkv.Layout.from_lengths([5], [[3, 4]])
    ids = torch.randint(0, model.config.vocab_size, (1, layout.num_tokens), device="cuda")
    with pytest.raises(ValueError, match=r"'q\.dtype': float32 is not compiled for CUDA"):
        model(input_ids=ids, position_ids=layout.position_ids[None].cuda(), dualkv_layout=layout, use_cache=False)
