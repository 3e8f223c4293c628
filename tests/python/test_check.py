"""dualkv.check (`python -m dualkv.check`) and the self-check the transformers integration runs on
first use."""

import functools
import inspect
import subprocess
import sys

import pytest
import torch
from models_support import model_pair, rollouts

import dualkv
import dualkv.transformers
from dualkv import _gated_deltanet, check
from dualkv.recurrent import RecurrentPlan
from dualkv.recurrent.fla_backend import FlaMissing
from dualkv.token_mixing import MODEL_CHECK_VARIABLE, UnsupportedModelError

CUDA_USABLE = torch.cuda.is_available() and dualkv.cuda_compiled
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not CUDA_USABLE, reason="no GPU"))]


def _run_check(*arguments):
    return subprocess.run(
        [sys.executable, "-m", "dualkv.check", *arguments], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("device", DEVICES)
def test_command_line_check_passes(device):
    result = _run_check("--device", device)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "PASS"
    for quantity in ("out", "dq", "dk", "dv", "log-probs", "parameter gradients"):
        assert any(line.strip().startswith(quantity) and line.endswith("pass") for line in lines), quantity
    assert any(line.startswith("tiny Qwen3.5 model (Gated DeltaNet)") for line in lines)


@pytest.mark.skipif(CUDA_USABLE, reason="CUDA is usable here")
def test_command_line_refuses_cuda_it_cannot_use():
    result = _run_check("--device", "cuda", "--no-model")
    assert result.returncode == 2
    assert "--device cuda: " in result.stderr


def _attention_across_responses(q, k, v, layout):
    """Wrong on purpose: every response also sees the earlier responses of its group (one causal
    sequence per group instead of the shared-prompt mask)."""
    groups = [[p + sum(rs)] for p, rs in zip(layout.prompt_lengths, layout.response_lengths)]
    causal = dualkv.Layout.from_lengths([g[0] - 1 for g in groups], [[1]] * len(groups))
    return dualkv.attention(q, k, v, causal)


def _nan_attention(q, k, v, layout):
    return dualkv.attention(q, k, v, layout) * float("nan")


@pytest.mark.parametrize("wrong", [_attention_across_responses, _nan_attention])
def test_a_wrong_attention_fails_the_check(wrong):
    result = check.check_attention("cpu", attention=wrong)
    assert not result.passed
    assert "FAIL" in result.report()


def test_a_recurrence_across_responses_fails_the_hybrid_model_check(monkeypatch):
    """Wrong on purpose: every response starts from the state the responses before it left (the
    stream's groups as one segment each), what a Gated DeltaNet blind to the layout computes."""

    def one_segment_per_group(layout, device):
        lengths = [p + sum(rs) for p, rs in zip(layout.prompt_lengths, layout.response_lengths)]
        return RecurrentPlan(torch.tensor([0, *lengths]).cumsum(0), [-1] * len(lengths), device)

    monkeypatch.setattr(_gated_deltanet, "recurrent_plan", one_segment_per_group)
    with pytest.raises(UnsupportedModelError, match="Qwen3_5GatedDeltaNet at model.layers.0.linear_attn"):
        check.check_model("cpu", model="qwen3.5")  # the model check refuses the layer first
    monkeypatch.setenv(MODEL_CHECK_VARIABLE, "0")  # without it, the numerical comparison must catch it
    result = check.check_model("cpu", model="qwen3.5")
    assert not result.passed
    assert "FAIL" in result.report() and "Qwen3.5" in result.report()


def test_cpu_models_of_the_check_run_transformers_pytorch_functions(monkeypatch):
    """With flash-linear-attention installed, transformers binds its Triton kernels in place of its
    PyTorch functions for every device; on CPU tensors they fail. The check's CPU models (the
    float32 reference always) must run the PyTorch functions, and leave the binding as it was."""
    from transformers.models.qwen3_5 import modeling_qwen3_5

    pytorch_function = inspect.unwrap(modeling_qwen3_5.torch_chunk_gated_delta_rule)

    @functools.wraps(pytorch_function)
    def cuda_only_kernel(query, *args, **kwargs):
        if query.device.type == "cpu":
            raise ValueError("Pointer argument cannot be accessed from Triton (cpu tensor?)")
        return pytorch_function(query, *args, **kwargs)

    # As bound with the package installed: dualkv's layout-aware function around the kernel.
    bound = _gated_deltanet._layout_aware(cuda_only_kernel, _gated_deltanet._packed_rule, "Qwen3_5GatedDeltaNet")
    monkeypatch.setattr(modeling_qwen3_5, "torch_chunk_gated_delta_rule", bound)
    assert check.check_model("cpu", model="qwen3.5").passed
    assert modeling_qwen3_5.torch_chunk_gated_delta_rule is bound


def test_a_hybrid_model_that_cannot_run_is_reported_not_failed(monkeypatch, capsys):
    def unavailable(device, dtype=None, model="qwen3"):
        if model == "qwen3.5":
            raise FlaMissing("Gated DeltaNet layers on CUDA need the package flash-linear-attention")
        return real_check_model(device, dtype, model)

    real_check_model = check.check_model
    monkeypatch.setattr(check, "check_model", unavailable)
    assert check.main(["--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == (
        "tiny Qwen3.5 model (Gated DeltaNet) on cpu: not checked: Gated DeltaNet layers on CUDA need the "
        "package flash-linear-attention"
    )
    assert lines[-1] == "PASS"


def _model_and_inputs():
    model, _ = model_pair("qwen3")
    packed = dualkv.pack(*rollouts(6, [(5, [3, 2]), (2, [4])]))
    inputs = {
        "input_ids": packed.input_ids,
        "position_ids": packed.position_ids,
        "dualkv_layout": packed.layout,
        "use_cache": False,
    }
    return model, inputs


@pytest.fixture
def fresh_process(monkeypatch):
    """As in a new process: no (device, dtype, shape) checked yet."""
    monkeypatch.setattr(dualkv.transformers, "_self_checked", set())
    monkeypatch.delenv(dualkv.transformers.SELF_CHECK_VARIABLE, raising=False)


def test_first_use_checks_once_per_shape(fresh_process, monkeypatch):
    calls, real_check = [], check.check_attention

    def recording_check(*args, **kwargs):
        calls.append((args, kwargs))
        return real_check(*args, **kwargs)

    monkeypatch.setattr(check, "check_attention", recording_check)
    model, inputs = _model_and_inputs()
    model(**inputs)
    model(**inputs)
    config = model.config
    assert calls == [
        (
            (torch.device("cpu"), torch.float32),
            {"heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads, "head_dim": config.head_dim},
        )
    ]


def _failing_check(device, dtype, **shape):
    measurements = (check.Measurement("out", error=0.5, baseline=1e-7),)
    return check.CheckResult("attention operator", torch.device(device), dtype, measurements)


def test_failed_first_use_check_is_a_clear_error(fresh_process, monkeypatch):
    monkeypatch.setattr(check, "check_attention", _failing_check)
    model, inputs = _model_and_inputs()
    with pytest.raises(RuntimeError, match=r"failed its self-check(.|\n)*out .* FAIL(.|\n)*DUALKV_SELF_CHECK=0"):
        model(**inputs)


def test_environment_variable_turns_the_check_off(fresh_process, monkeypatch):
    monkeypatch.setattr(check, "check_attention", _failing_check)
    monkeypatch.setenv(dualkv.transformers.SELF_CHECK_VARIABLE, "0")
    model, inputs = _model_and_inputs()
    assert model(**inputs).logits.isfinite().all()


@pytest.mark.parametrize("mode", [torch.inference_mode, torch.no_grad], ids=["inference_mode", "no_grad"])
def test_first_use_check_runs_inside_a_no_grad_forward(fresh_process, mode):
    """Old and reference log-probs are computed without gradients; the check needs them."""
    model, inputs = _model_and_inputs()
    with mode():
        model(**inputs)
    assert len(dualkv.transformers._self_checked) == 1


def _selective_checkpointing():
    """torch.utils.checkpoint's selective checkpointing, keeping the outputs of ops the self-check
    runs too: its forward caches them per op, and its recomputation takes them back in order."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    saved = {
        torch.ops.dualkv.attention_forward.default,
        torch.ops.aten._to_copy.default,
        torch.ops.aten.mul.Tensor,
        torch.ops.aten.add.Tensor,
        torch.ops.aten.mm.default,
    }

    def policy(context, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return functools.partial(create_selective_checkpoint_contexts, policy)


CHECKPOINTING = {
    "non_reentrant": lambda: {"use_reentrant": False},
    "reentrant": lambda: {"use_reentrant": True},
    "selective": lambda: {"use_reentrant": False, "context_fn": _selective_checkpointing()},
}


@pytest.mark.parametrize("checkpointing", list(CHECKPOINTING))
def test_first_use_check_inside_activation_checkpointing(fresh_process, checkpointing):
    """The first attention call of the process inside a checkpointed layer (the training step's
    first forward pass under shard_policy): the check's own forward and backward must not change
    what the layer saves, or the recomputation in backward differs from the original forward."""
    checkpointed, inputs = _model_and_inputs()
    plain, _ = _model_and_inputs()
    checkpointed.gradient_checkpointing_enable(gradient_checkpointing_kwargs=CHECKPOINTING[checkpointing]())
    checkpointed.train()
    plain.train()
    checkpointed(**inputs).logits.sum().backward()
    assert len(dualkv.transformers._self_checked) == 1
    plain(**inputs).logits.sum().backward()
    for (name, expected), got in zip(plain.named_parameters(), checkpointed.parameters()):
        torch.testing.assert_close(got.grad, expected.grad, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


def test_first_use_check_inside_a_backward_pass(fresh_process):
    """A first call from a function autograd runs (there the check runs in the calling thread)."""
    model, inputs = _model_and_inputs()

    class ForwardInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            with torch.enable_grad():
                model(**inputs).logits.sum().backward()
            return grad

    x = torch.ones(3, requires_grad=True)
    ForwardInBackward.apply(x).sum().backward()
    assert len(dualkv.transformers._self_checked) == 1
    assert all(p.grad is not None for p in model.parameters())
