"""dualkv.training.fuse_elementwise: a tiny Qwen3 policy with fused RMSNorm and gated-MLP layers gives
the log-probs, entropies and parameter gradients of the eager model (fp32, on the CPU)."""

import copy

import torch

import dualkv
from dualkv.training import PackedPolicy
from dualkv.training.fused import fuse_elementwise
from dualkv.training.models import build_model, model_config

PROMPTS = [[5, 9, 2, 7, 1, 3, 8], [4, 4]]
RESPONSES = [[[11, 12, 13], [14], [15, 16, 17, 18, 19]], [[20, 21], [22, 23, 24]]]


def _scores_and_grads(lm, batch):
    logprobs, entropy = PackedPolicy(lm)(batch)
    (logprobs.sum() + 0.1 * (entropy * logprobs.detach()).sum()).backward()
    return (logprobs, entropy), {name: p.grad for name, p in lm.named_parameters()}


def test_fused_policy_equals_eager_policy():
    eager = build_model("tiny-qwen3", seed=3)
    fused = copy.deepcopy(eager)
    layers = model_config("tiny-qwen3").num_hidden_layers
    # Per layer: input, post-attention, query and key norms, and the MLP; then the final norm.
    assert fuse_elementwise(fused) == 5 * layers + 1
    batch = dualkv.pack(PROMPTS, RESPONSES)
    eager_scores, eager_grads = _scores_and_grads(eager, batch)
    fused_scores, fused_grads = _scores_and_grads(fused, batch)
    for a, b in zip(fused_scores, eager_scores):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert eager_grads.keys() == fused_grads.keys()
    for name, grad in eager_grads.items():
        assert grad is not None and torch.count_nonzero(grad) > 0, name
        torch.testing.assert_close(fused_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)


def test_a_deep_copy_of_a_fused_model_runs_on_its_own_weights():
    model = build_model("tiny-qwen3", seed=4)
    fuse_elementwise(model)
    clone = copy.deepcopy(model)
    norm, clone_norm = model.model.norm, clone.model.norm
    assert clone_norm.forward.__self__ is clone_norm
    with torch.no_grad():
        clone_norm.weight.mul_(2)
        x = torch.randn(3, norm.weight.numel())
        torch.testing.assert_close(clone_norm(x), 2 * norm(x))


def test_modules_that_are_not_rms_norms_or_silu_mlps_are_left_alone():
    class GeluMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = self.up_proj = self.down_proj = torch.nn.Linear(4, 4)
            self.act_fn = torch.nn.GELU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    model = torch.nn.Sequential(GeluMLP(), torch.nn.LayerNorm(4))
    forwards = [m.forward for m in model]
    assert fuse_elementwise(model) == 0
    assert [m.forward for m in model] == forwards
