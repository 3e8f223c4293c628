"""The CUDA op inside whole models, in bf16, and against the CPU op on the same inputs.

Model level: a tiny random-init Qwen3, Llama and the hybrid Qwen3.5, Qwen3.5-MoE and Qwen3-Next
(Gated DeltaNet on flash-linear-attention), at head dims 64 and 256, which the CUDA kernels compile,
packed with attn_implementation="dualkv" and as the N-copy batch with "sdpa", both bf16 on CUDA,
each compared with the fp32 N-copy model on the same (bf16-rounded) weights. The N-copy bf16
model's own error to that reference is what bf16 costs; dualkv's error on log-probs, loss and
the whole parameter gradient must be at most twice it, plus a small floor, and on each parameter's
gradient at most four times it. Per parameter the budget is wider because a parameter whose
gradient sums every token into a few values (a Gated DeltaNet head's A_log, Qwen3.5-MoE's
shared-expert gate) is mostly cancellation, so its bf16 error is noise: packed against N-copy,
both in bf16 on the CPU with no CUDA kernel involved, such parameters measured 2.0x (shared-expert
gate, the shapes below) and 2.75x (A_log, one prompt with 16 responses), and the shared-expert
gate 3.2x on an H200. Over four other weight draws on the CPU the whole gradient's ratio was
0.92-1.00 and the largest parameter's 1.6-2.1, each time an A_log or a shared-expert gate. A layer
that mishandles the layout is off by orders more than bf16's noise.
Op level: the CUDA op against the CPU op on the same fp16/bf16 inputs.
"""

import pytest
import torch
from models_support import CONFIGS, HYBRID_MODELS, hybrid_cuda_unavailable, right_padded_rows, rollouts
from test_models import _ncopy_logprobs
from test_op_attention import HEADS, KV_HEADS
from transformers import AutoModelForCausalLM

import dualkv
import dualkv.transformers  # registers attn_implementation="dualkv"
from dualkv import losses

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")

HEAD_DIMS = [64, 256]  # the tiny configs' 16 is not compiled for CUDA; these are
# Several groups, ragged responses (R = 1 included), prompts longer than one 64-key tile.
SHAPES = [(70, [23, 64, 1, 9]), (5, [80, 3]), (33, [17])]
ERROR_RATIO = 2.0
ERROR_RATIO_PER_PARAMETER = 4.0  # the module docstring says why
# A 32nd of bf16's resolution: below every error either model makes here (log-probs, computed
# in fp32 from bf16 logits, are the smallest), so it only keeps an N-copy error that happens to
# vanish from demanding an exact match.
ERROR_FLOOR = torch.finfo(torch.bfloat16).eps / 32


def _models(name, device, head_dim):
    """(packed bf16 "dualkv", N-copy bf16 "sdpa", N-copy fp32 "sdpa") sharing bf16-rounded weights,
    so the fp32 model measures only the error of computing in bf16."""
    torch.manual_seed(0)
    models = []
    for attention, dtype in (("dualkv", torch.bfloat16), ("sdpa", torch.bfloat16), ("sdpa", torch.float32)):
        config = CONFIGS[name]()  # one config object each: from_config records the attention in it
        config.head_dim = head_dim
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attention, dtype=torch.float32)
        if models:  # the first model's weights, already rounded to bf16
            model.load_state_dict(models[0].state_dict())
        models.append(model.to(device=device, dtype=dtype))
    return models


class RolloutPolicies:
    """Rewards and the rollout (old) and reference policies' log-probs, fixed for all three models
    (the fp32 model's log-probs, perturbed), so the GRPO loss value depends on the model's log-probs."""

    def __init__(self, packed, logprobs, seed=2):
        gen = torch.Generator().manual_seed(seed)
        noise = torch.randn(logprobs.shape, generator=gen)
        self.packed = packed
        self.advantages = losses.group_advantages(
            torch.rand(packed.num_responses, generator=gen), packed.response_group
        )
        self.old_logprobs = logprobs + 0.1 * noise
        self.ref_logprobs = logprobs - 0.05 * noise.abs()

    def grpo_loss(self, logprobs):
        return losses.policy_loss(
            logprobs,
            self.old_logprobs,
            self.advantages,
            self.packed.response_mask,
            clip_low=0.2,
            clip_high=0.28,
            aggregation="seq-mean-token-mean",
            ref_logprobs=self.ref_logprobs,
            kl_coef=0.04,
        )


def _ncopy_logprobs_of(model, prompts, responses, device):
    input_ids, attention_mask, _, prompt_lengths = right_padded_rows(prompts, responses)
    logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), use_cache=False).logits
    return _ncopy_logprobs(logits.float().cpu(), input_ids, prompt_lengths, attention_mask)


def _packed_logprobs_of(model, packed, device):
    logits = model(
        input_ids=packed.input_ids.to(device),
        position_ids=packed.position_ids.to(device),
        dualkv_layout=packed.layout,
        use_cache=False,
    ).logits
    return dualkv.response_logprobs(logits, packed.to(device)).float().cpu()


def _loss_and_backward(logprobs, policies):
    """(log-probs, loss, d loss / d log-probs), after backpropagating the loss into the model."""
    loss = policies.grpo_loss(logprobs)
    (loss_gradient,) = torch.autograd.grad(loss, logprobs, retain_graph=True)
    loss.backward()
    return logprobs.detach(), loss.detach(), loss_gradient


def _relative_error(actual, expected):
    actual, expected = actual.double().cpu(), expected.double().cpu()
    return float((actual - expected).norm() / expected.norm().clamp(min=1e-30))


def model_errors(name, device, head_dim):
    """{quantity: (dualkv's relative error, N-copy bf16's relative error)} against the fp32 N-copy model."""
    packed_model, ncopy_model, reference_model = _models(name, device, head_dim)
    prompts, responses = rollouts(7, SHAPES)
    packed = dualkv.pack(prompts, responses)
    reference_logprobs = _ncopy_logprobs_of(reference_model, prompts, responses, device)
    policies = RolloutPolicies(packed, reference_logprobs.detach())
    reference_logprobs, reference_loss, loss_gradient = _loss_and_backward(reference_logprobs, policies)
    ncopy_logprobs, *_ = _loss_and_backward(_ncopy_logprobs_of(ncopy_model, prompts, responses, device), policies)
    packed_logprobs, packed_loss, _ = _loss_and_backward(_packed_logprobs_of(packed_model, packed, device), policies)
    ncopy_logprobs_error = _relative_error(ncopy_logprobs, reference_logprobs)
    # The GRPO loss is near zero (advantages have zero group mean), so its own relative error is
    # noise. To first order |loss error| <= |d loss / d log-probs| |log-prob error| (Cauchy-Schwarz):
    # dualkv's loss error, in units of |d loss / d log-probs| |log-probs|, is held to the N-copy
    # model's log-prob error, the most that bf16 log-probs of that accuracy can move the loss.
    loss_scale = float(loss_gradient.norm() * reference_logprobs.norm())
    errors = {
        "logprobs": (_relative_error(packed_logprobs, reference_logprobs), ncopy_logprobs_error),
        "loss": (abs(float(packed_loss - reference_loss)) / loss_scale, ncopy_logprobs_error),
    }
    parameters = list(zip(packed_model.named_parameters(), ncopy_model.parameters(), reference_model.parameters()))
    for (parameter_name, packed_parameter), ncopy_parameter, reference_parameter in parameters:
        errors[parameter_name] = (
            _relative_error(packed_parameter.grad, reference_parameter.grad),
            _relative_error(ncopy_parameter.grad, reference_parameter.grad),
        )

    def whole_gradient(model_parameters):
        return torch.cat([parameter.grad.double().cpu().flatten() for parameter in model_parameters])

    reference_gradient = whole_gradient(reference for *_, reference in parameters)
    errors[WHOLE_GRADIENT] = (
        _relative_error(whole_gradient(packed for (_, packed), *_ in parameters), reference_gradient),
        _relative_error(whole_gradient(ncopy for _, ncopy, _ in parameters), reference_gradient),
    )
    return errors


WHOLE_GRADIENT = "all parameter gradients"
MODEL_QUANTITIES = ("logprobs", "loss", WHOLE_GRADIENT)


def error_budget(quantity, ncopy_error):
    ratio = ERROR_RATIO if quantity in MODEL_QUANTITIES else ERROR_RATIO_PER_PARAMETER
    return ratio * ncopy_error + ERROR_FLOOR


_HYBRID_SKIP = pytest.mark.skipif(hybrid_cuda_unavailable() is not None, reason=str(hybrid_cuda_unavailable()))


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("name", ["qwen3", "llama", *(pytest.param(n, marks=_HYBRID_SKIP) for n in HYBRID_MODELS)])
def test_bf16_packed_model_is_as_accurate_as_the_ncopy_batch(name, head_dim):
    errors = model_errors(name, "cuda", head_dim)
    worse = {
        quantity: f"dualkv {packed:.2e} vs N-copy {ncopy:.2e}, budget {error_budget(quantity, ncopy):.2e}"
        for quantity, (packed, ncopy) in errors.items()
        if not packed <= error_budget(quantity, ncopy)
    }
    assert not worse, f"bf16 errors to the fp32 N-copy model beyond their budget: {worse}"


# Prompts and responses across 64- and 128-token tile edges, R = 1, P = 1, several groups.
OP_LAYOUT = ([70, 1, 130], [[33, 1, 64, 90], [5, 2], [129, 7, 1]])


def _op_inputs(kv_heads, head_dim, dtype):
    gen = torch.Generator().manual_seed(kv_heads * 1000 + head_dim)
    layout = dualkv.Layout.from_lengths(*OP_LAYOUT)
    tokens = layout.num_tokens

    def draw(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    q, k, v = draw(tokens, HEADS, head_dim), draw(tokens, kv_heads, head_dim), draw(tokens, kv_heads, head_dim)
    return layout, q, k, v, draw(tokens, HEADS, head_dim)


def _op_results(device, layout, q, k, v, dout):
    # New leaves per device: on the CPU .to() would return q itself and mark it as requiring grad.
    leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    out, lse = dualkv.attention_with_lse(*leaves, layout)
    out.backward(dout.to(device))
    return [t.detach().cpu() for t in (out, lse, *(leaf.grad for leaf in leaves))]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kv_heads", KV_HEADS)
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_cuda_op_matches_cpu_op(head_dim, kv_heads, dtype):
    layout, q, k, v, dout = _op_inputs(kv_heads, head_dim, dtype)
    cpu = _op_results("cpu", layout, q, k, v, dout)
    cuda = _op_results("cuda", layout, q, k, v, dout)
    # test_op_attention holds each op within max(8 eps(dtype), 64 eps(fp32)) of the exact result
    # (64 eps(fp32) for lse, which both compute in fp32), so the two are within twice that.
    tolerance = 2 * max(8 * torch.finfo(dtype).eps, 64 * torch.finfo(torch.float32).eps)
    lse_tolerance = 2 * 64 * torch.finfo(torch.float32).eps
    for name, got, expected in zip(("out", "lse", "dq", "dk", "dv"), cuda, cpu):
        limit = lse_tolerance if name == "lse" else tolerance
        torch.testing.assert_close(
            got.double(), expected.double(), rtol=limit, atol=limit, msg=lambda m, name=name: f"{name}: {m}"
        )
