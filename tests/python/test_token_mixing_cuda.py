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


def _model(name):
    config = CONFIGS[name]()
    config.head_dim = 64  # compiled for the CUDA kernels (the tiny configs' 16 is not)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="dualkv").to("cuda", torch.bfloat16)


@pytest.mark.parametrize("name", ["qwen3", "qwen3_moe", "llama"])
def test_models_that_keep_to_the_layout_pass_on_cuda(name):
    check_token_mixing(_model(name))


def test_a_layer_that_mixes_tokens_is_refused_on_cuda():
    model = _model("qwen3")
    model.model.layers[1].mlp = WithRunningSum(model.model.layers[1].mlp)
    with pytest.raises(UnsupportedModelError, match=r"RunningSum at model\.layers\.1\.mlp\.mixer"):
        check_token_mixing(model)
