"""Self-check on the user's own device and software: `python -m dualkv.check`.

Runs the attention operator and two tiny random-initialised transformers models (Qwen3, and the
hybrid Qwen3.5: Gated DeltaNet layers with the prompt-state hand-off, then gated attention) on the
packed layout and on the N-copy layout ([prompt; response_i] per response, the computation packing
must equal), and prints each error with its budget and PASS or FAIL (exit status 0 or 1). The
hybrid model needs flash-linear-attention on CUDA (pip install 'dualkv[hybrid]'); where it cannot
run (that package missing, or a Triton that computes its backward wrongly on this GPU) the check
says why on a line of its own and does not count it: hybrid models are then refused with that
same message when used.

Every error is a relative L2 error against the N-copy computation in float64 on the CPU (float32
for the model). Its budget is twice the error of PyTorch's own N-copy computation in the dtype
being checked (scaled-dot-product attention; the model with attn_implementation="sdpa") on the
same device and inputs, and at least FLOOR: so a low-precision dtype is held to what that dtype
costs PyTorch, and float32 to float32 accuracy.

`dualkv.transformers` runs `check_attention` once per device and dtype on first use.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import _C
from ._attention import attention as dualkv_attention
from ._layout import Layout

__all__ = ["MODELS", "CheckResult", "Measurement", "check_attention", "check_model", "default_device", "main"]

ERROR_RATIO = 2.0
FLOOR = 1e-5
# Several groups, ragged responses, R = 1, P = 1, a prompt longer than one 64-key tile.
PROMPT_LENGTHS = [70, 1, 9]
RESPONSE_LENGTHS = [[33, 1, 17], [5, 2], [12]]
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 64  # grouped-query attention; a head_dim the CUDA kernels compile

_MODEL_SHAPE = dict(
    vocab_size=128,
    hidden_size=128,
    intermediate_size=192,
    num_attention_heads=HEADS,
    num_key_value_heads=KV_HEADS,
    head_dim=HEAD_DIM,
    max_position_embeddings=256,
)
# name -> (title, transformers config class name, its keyword arguments besides _MODEL_SHAPE)
MODELS = {
    "qwen3": ("tiny Qwen3 model", "Qwen3Config", dict(num_hidden_layers=2)),
    "qwen3.5": (
        "tiny Qwen3.5 model (Gated DeltaNet)",
        "Qwen3_5TextConfig",
        dict(
            num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=32,
            linear_value_head_dim=32,
            linear_conv_kernel_dim=4,
        ),
    ),
}


@dataclass(frozen=True)
class Measurement:
    name: str
    error: float  # relative L2 error against the float64 (float32) N-copy computation
    baseline: float  # PyTorch's own N-copy error in the checked dtype

    @property
    def budget(self) -> float:
        return max(ERROR_RATIO * self.baseline, FLOOR)

    @property
    def passed(self) -> bool:
        return self.error <= self.budget  # False for NaN


@dataclass(frozen=True)
class CheckResult:
    title: str
    device: torch.device
    dtype: torch.dtype
    measurements: tuple[Measurement, ...]

    @property
    def passed(self) -> bool:
        return all(m.passed for m in self.measurements)

    def report(self) -> str:
        lines = [f"{self.title} on {self.device}, {str(self.dtype).removeprefix('torch.')}, packed vs N-copy:"]
        for m in self.measurements:
            verdict = "pass" if m.passed else "FAIL"
            lines.append(
                f"  {m.name:<22} error {m.error:.2e}  budget {m.budget:.2e} (PyTorch N-copy {m.baseline:.2e})  {verdict}"
            )
        return "\n".join(lines)


def default_device() -> torch.device:
    """The GPU when one is visible and this build has the CUDA kernels, else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() and _C.cuda_compiled() else torch.device("cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def check_attention(
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    *,
    heads: int = HEADS,
    kv_heads: int = KV_HEADS,
    head_dim: int = HEAD_DIM,
    attention: Callable[..., torch.Tensor] = dualkv_attention,
) -> CheckResult:
    """The operator's output and gradients on `device` in `dtype` (defaults: `default_device()`,
    bfloat16 on CUDA, float32 on the CPU), with the given head counts and head dimension (the CUDA
    kernels differ per head dimension). `attention` is what is checked; tests pass a wrong one."""
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    layout = Layout.from_lengths(PROMPT_LENGTHS, RESPONSE_LENGTHS)
    generator = torch.Generator().manual_seed(20261123)
    with _isolated(device):
        # Values representable in `dtype`, so that every computation starts from the same inputs.
        q, k, v, dout = (
            torch.randn(layout.num_tokens, count, head_dim, generator=generator).to(dtype).double()
            for count in (heads, kv_heads, kv_heads, heads)
        )
        exact = _ncopy_attention(q, k, v, dout, layout)
        baseline = _ncopy_attention(*(t.to(device, dtype) for t in (q, k, v, dout)), layout)
        leaves = [t.to(device, dtype).requires_grad_() for t in (q, k, v)]
        out = attention(*leaves, layout)
        out.backward(dout.to(device, dtype))
        packed = (out.detach(), *(leaf.grad for leaf in leaves))
    measurements = tuple(
        Measurement(name, _relative_error(got, want), _relative_error(base, want))
        for name, got, base, want in zip(("out", "dq", "dk", "dv"), packed, baseline, exact)
    )
    return CheckResult("attention operator", device, dtype, measurements)


def check_model(
    device: torch.device | str | None = None, dtype: torch.dtype | None = None, model: str = "qwen3"
) -> CheckResult:
    """A tiny random-initialised model of MODELS (Qwen3 or the hybrid Qwen3.5) with
    attn_implementation="dualkv" on the packed batch against the same model with "sdpa" on the
    N-copy rows: per-response log-probs, and the gradient of their sum with respect to every
    parameter. Needs transformers."""
    import transformers
    from transformers import AutoModelForCausalLM

    from . import transformers as _registers_dualkv  # noqa: F401
    from .logprobs import response_logprobs
    from .packing import pack

    if model not in MODELS:
        raise ValueError(f"model: expected one of {sorted(MODELS)}, got {model!r}")
    title, config_name, settings = MODELS[model]
    config_class = getattr(transformers, config_name)
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    generator = torch.Generator().manual_seed(20261124)
    prompts = [torch.randint(1, 128, (p,), generator=generator).tolist() for p in PROMPT_LENGTHS]
    responses = [
        [torch.randint(1, 128, (r,), generator=generator).tolist() for r in group] for group in RESPONSE_LENGTHS
    ]
    packed = pack(prompts, responses)
    with _isolated(device):
        make_config = functools.partial(config_class, **_MODEL_SHAPE, **settings)
        models = _model_triplet(AutoModelForCausalLM, make_config, device, dtype)
        exact = _ncopy_model_logprobs(models["reference"], prompts, responses, device)
        baseline = _ncopy_model_logprobs(models["ncopy"], prompts, responses, device)
        inputs = {
            "input_ids": packed.input_ids.to(device),
            "position_ids": packed.position_ids.to(device),
            "dualkv_layout": packed.layout,
            "use_cache": False,
        }
        logits = models["packed"](**inputs).logits
        got = response_logprobs(logits, packed.to(device))[packed.response_mask.to(device)]
        for logprobs in (exact, baseline, got):
            logprobs.sum().backward()
        gradients = {name: _flat_gradient(model) for name, model in models.items()}
    measurements = (
        Measurement("log-probs", _relative_error(got, exact), _relative_error(baseline, exact)),
        Measurement(
            "parameter gradients",
            _relative_error(gradients["packed"], gradients["reference"]),
            _relative_error(gradients["ncopy"], gradients["reference"]),
        ),
    )
    return CheckResult(title, device, dtype, measurements)


def _ncopy_attention(q, k, v, dout, layout: Layout):
    """(out, dq, dk, dv) of causal attention over every [prompt; response] separately. The packed
    batch holds a prompt row once: its value and upstream gradient are the first copy's, and
    autograd sums the prompt's dq/dk/dv over the copies."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    pieces, start = [], 0
    for prompt, responses in zip(layout.prompt_lengths, layout.response_lengths):
        prompt_rows = torch.arange(start, start + prompt, device=q.device)
        start += prompt
        for copy, length in enumerate(responses):
            rows = torch.cat([prompt_rows, torch.arange(start, start + length, device=q.device)])
            q_rows, k_rows, v_rows = (t[rows].transpose(0, 1) for t in leaves)
            out = F.scaled_dot_product_attention(q_rows, k_rows, v_rows, is_causal=True, enable_gqa=True)
            out = out.transpose(0, 1)
            pieces.append(out if copy == 0 else out[prompt:])
            start += length
    out = torch.cat(pieces)
    out.backward(dout)
    return out.detach(), *(leaf.grad for leaf in leaves)


def _model_triplet(auto_model, make_config, device, dtype) -> dict:
    """The same weights three times: "packed" (dualkv, dtype), "ncopy" (sdpa, dtype) and
    "reference" (sdpa, float32 on the CPU). The weights are rounded to dtype first, so the
    reference measures only the error of computing in dtype."""
    models = {}
    for name, attention_name in (("reference", "sdpa"), ("ncopy", "sdpa"), ("packed", "dualkv")):
        config = make_config()
        # transformers' own initialisation, from a fixed seed without touching the caller's RNG.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(20261125)
            model = auto_model.from_config(config, attn_implementation=attention_name, dtype=torch.float32)
        if not models:
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.copy_(parameter.to(dtype).float())
        else:
            model.load_state_dict(models["reference"].state_dict())
        models[name] = model if name == "reference" else model.to(device, dtype)
    return models


def _ncopy_model_logprobs(model, prompts, responses, device) -> torch.Tensor:
    """Log-probs of every response token, one [prompt; response] sequence at a time, in packing order."""
    model_device = next(model.parameters()).device
    result = []
    on_cpu = _transformers_pytorch_functions(model) if model_device.type == "cpu" else contextlib.nullcontext()
    with on_cpu:
        for prompt, group in zip(prompts, responses):
            for response in group:
                ids = torch.tensor([prompt + response], device=model_device)
                logits = model(input_ids=ids, use_cache=False).logits[0].float()
                scores = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
                result.append(scores.gather(1, ids[0, len(prompt) :, None])[:, 0])
    return torch.cat(result).to(device)


def _flat_gradient(model) -> torch.Tensor:
    return torch.cat([p.grad.detach().double().cpu().reshape(-1) for p in model.parameters()])


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.detach().double().cpu(), expected.detach().double().cpu()
    error = float((actual - expected).norm() / expected.norm().clamp(min=1e-30))
    return error if math.isfinite(error) else math.nan


@contextlib.contextmanager
def _transformers_pytorch_functions(model: torch.nn.Module):
    """Runs `model` on transformers' own PyTorch functions. Where flash-linear-attention (or
    causal-conv1d) is installed, transformers binds its kernels in their place at import, for every
    device, and those are Triton kernels for CUDA tensors: the CPU reference would fail. The bound
    names are wrappers whose `__wrapped__` is the PyTorch function, called as the wrappers call their
    implementation (keywords it does not take dropped); they are restored on exit."""
    replaced = []
    for module in {sys.modules[type(layer).__module__] for layer in model.modules()}:
        for name, value in list(vars(module).items()):
            pytorch_function = inspect.unwrap(value) if isinstance(value, types.FunctionType) else value
            if pytorch_function is not value:
                replaced.append((module, name, value))
                setattr(module, name, _taking_known_keywords(pytorch_function))
    try:
        yield
    finally:
        for module, name, value in replaced:
            setattr(module, name, value)


def _taking_known_keywords(function: Callable) -> Callable:
    parameters = inspect.signature(function).parameters
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return function

    @functools.wraps(function)
    def call(*args, **kwargs):
        return function(*args, **{name: value for name, value in kwargs.items() if name in parameters})

    return call


@contextlib.contextmanager
def _isolated(device: torch.device):
    """Computes as if called from plain eager code: with gradients, outside inference mode and
    autocast, whatever the caller (a model's forward pass, on first use) had switched on."""
    with torch.inference_mode(False), torch.enable_grad(), torch.autocast(device.type, enabled=False):
        yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dualkv.check", description="dualkv on this machine, packed against the N-copy computation."
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--no-model", action="store_true", help="check the attention operator only")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not _C.cuda_compiled():
        parser.error("--device cuda: this dualkv build has no CUDA kernels (rebuild with nvcc and a CUDA torch)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA device")
    device = default_device() if args.device == "auto" else torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"dualkv self-check on {name}: torch {torch.__version__}, CUDA kernels compiled: {_C.cuda_compiled()}")
    results = [check_attention(device)]
    if not args.no_model:
        results.append(check_model(device))
        hybrid = _hybrid_model_check(device)
        results += [hybrid] if isinstance(hybrid, CheckResult) else []
    for result in results:
        print(result.report())
    if not args.no_model and not isinstance(hybrid, CheckResult):
        print(f"{MODELS['qwen3.5'][0]} on {device}: not checked: {hybrid}")
    passed = all(result.passed for result in results)
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


def _hybrid_model_check(device: torch.device) -> CheckResult | str:
    """check_model for the hybrid model, or why it cannot run here: its optional CUDA package is
    missing, or this GPU's Triton computes its backward wrongly (the errors dualkv raises then)."""
    from .recurrent.fla_backend import HybridUnavailable

    try:
        return check_model(device, model="qwen3.5")
    except HybridUnavailable as reason:
        return str(reason)


if __name__ == "__main__":
    sys.exit(main())
