"""The token-score operators (torch.ops.dualkv.token_scores_forward / _backward) against a float64
formula, on the CPU and, when present, on CUDA; their registration (opcheck) and their errors."""

import pytest
import torch

import dualkv  # noqa: F401  (registers torch.ops.dualkv)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and dualkv.cuda_compiled() else [])
# Tolerances of the 16-bit gradient: its storage rounding (2^-8 relative for bf16, 2^-11 for fp16).
GRAD_TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def reference(logits, inverse_temperature, offsets, targets, grad_logprob, grad_entropy):
    """lse, entropy and the gradient of sum_u g_lp[u] logprob_u + g_ent[u] entropy_u, in float64."""
    z = logits.double() * inverse_temperature
    log_p = torch.log_softmax(z, dim=-1)
    p = log_p.exp()
    lse = torch.logsumexp(z, dim=-1)
    entropy = -torch.special.xlogy(p, p).sum(-1)
    rows = torch.repeat_interleave(torch.arange(len(logits)), offsets.diff())
    a = torch.zeros(len(logits), dtype=torch.float64).index_add_(0, rows, grad_logprob.double())
    b = torch.zeros(len(logits), dtype=torch.float64).index_add_(0, rows, grad_entropy.double())
    grad = -p * a[:, None] - (torch.special.xlogy(p, p) + p * entropy[:, None]) * b[:, None]
    grad.index_put_((rows, targets), grad_logprob.double(), accumulate=True)
    return lse, entropy, grad * inverse_temperature


def problem(rows, vocab, dtype, device, seed=0):
    """Random logits (one padded row stride) and uses: row 0 scores nothing, row 1 the same token
    twice, the others one to three tokens each."""
    gen = torch.Generator().manual_seed(seed)
    storage = (torch.randn(rows, vocab + 3, generator=gen) * 3).to(device=device, dtype=dtype)
    logits = storage[:, :vocab]  # rows vocab + 3 apart
    counts = torch.randint(1, 4, (rows,), generator=gen)
    counts[0] = 0
    if rows > 1:
        counts[1] = 2
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    targets = torch.randint(0, vocab, (int(offsets[-1]),), generator=gen)
    if rows > 1:
        targets[offsets[1] + 1] = targets[offsets[1]]
    grad_logprob = torch.randn(len(targets), generator=gen)
    grad_entropy = torch.randn(len(targets), generator=gen)
    return logits, offsets, targets, grad_logprob, grad_entropy


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab", [1, 17, 129, 1023])
def test_forward_and_backward_equal_the_float64_formula(device, dtype, vocab):
    logits, offsets, targets, g_lp, g_ent = problem(5, vocab, dtype, device)
    inverse_temperature = 1 / 0.7
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, inverse_temperature)
    uses = [x.to(device) for x in (offsets, targets, g_lp, g_ent)]
    grad = torch.ops.dualkv.token_scores_backward(logits, inverse_temperature, lse, entropy, *uses)
    want_lse, want_entropy, want_grad = reference(logits.cpu(), inverse_temperature, offsets, targets, g_lp, g_ent)
    torch.testing.assert_close(lse.cpu().double(), want_lse, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy.cpu().double(), want_entropy, rtol=1e-5, atol=1e-5)
    assert grad.dtype == dtype and grad.shape == logits.shape
    # Absolute floor: the incoming gradients' size (lse is stored in fp32, so p of a one-token
    # vocabulary is 1 only to fp32 precision and the exact 0 there comes out near 1e-7).
    tolerance, scale = GRAD_TOLERANCE[dtype], max(float(g_lp.abs().max()), float(g_ent.abs().max()))
    torch.testing.assert_close(grad.cpu().double(), want_grad, rtol=tolerance, atol=tolerance * scale)
    assert (grad[0] == 0).all()  # a row that scores nothing has no gradient


@pytest.mark.parametrize("device", DEVICES)
def test_nan_stays_in_its_row(device):
    logits, offsets, targets, g_lp, g_ent = problem(4, 33, torch.float32, device)
    logits[2, 5] = float("nan")
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, 1.0)
    uses = [x.to(device) for x in (offsets, targets, g_lp, g_ent)]
    grad = torch.ops.dualkv.token_scores_backward(logits, 1.0, lse, entropy, *uses)
    assert lse[2].isnan() and entropy[2].isnan() and grad[2].isnan().all()
    others = torch.tensor([0, 1, 3], device=device)
    assert lse[others].isfinite().all() and grad[others].isfinite().all()


@pytest.mark.skipif("cuda" not in DEVICES, reason="no GPU or a CPU-only build")
def test_cuda_fills_a_row_with_a_bad_target_with_nan():
    logits, offsets, targets, g_lp, g_ent = problem(4, 33, torch.bfloat16, "cuda")
    targets[int(offsets[2])] = 33  # past the vocabulary: device memory cannot raise without a sync
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, 1.0)
    uses = [x.cuda() for x in (offsets, targets, g_lp, g_ent)]
    grad = torch.ops.dualkv.token_scores_backward(logits, 1.0, lse, entropy, *uses)
    assert grad[2].isnan().all()
    assert grad[torch.tensor([0, 1, 3])].isfinite().all()


def test_cpu_names_a_bad_target():
    logits, offsets, targets, g_lp, g_ent = problem(4, 33, torch.float32, "cpu")
    targets[3] = -1
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, 1.0)
    with pytest.raises(ValueError, match=r"'uses\.targets\[3\]'.*\[0, vocab\)"):
        torch.ops.dualkv.token_scores_backward(logits, 1.0, lse, entropy, offsets, targets, g_lp, g_ent)


@pytest.mark.parametrize(
    "change, argument",
    [
        (lambda a: {**a, "logits": a["logits"][:, None]}, "logits"),
        (lambda a: {**a, "logits": a["logits"].to(torch.int32)}, "logits"),
        (lambda a: {**a, "inverse_temperature": 0.0}, "inverse_temperature"),
        (lambda a: {**a, "lse": a["lse"][:-1]}, "lse.count"),
        (lambda a: {**a, "use_offsets": a["use_offsets"].int()}, "uses.offsets"),
        (lambda a: {**a, "use_offsets": a["use_offsets"][:-1]}, "uses.offsets.count"),
        (lambda a: {**a, "grad_entropy": a["grad_entropy"][:-1]}, "uses.grad_entropy.count"),
        (lambda a: {**a, "grad_logprob": a["grad_logprob"].double()}, "uses.grad_logprob"),
    ],
)
def test_bad_arguments_name_the_argument(change, argument):
    logits, offsets, targets, g_lp, g_ent = problem(4, 33, torch.float32, "cpu")
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, 1.0)
    arguments = dict(logits=logits, inverse_temperature=1.0, lse=lse, entropy=entropy, use_offsets=offsets,
                     targets=targets, grad_logprob=g_lp, grad_entropy=g_ent)
    with pytest.raises(ValueError, match=f"invalid argument '{argument}'"):
        torch.ops.dualkv.token_scores_backward(**change(arguments))


def test_inputs_are_unmodified():
    logits, offsets, targets, g_lp, g_ent = problem(4, 33, torch.bfloat16, "cpu")
    inputs = (logits, offsets, targets, g_lp, g_ent)
    copies = [x.clone() for x in inputs]
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, 1.0)
    torch.ops.dualkv.token_scores_backward(logits, 1.0, lse, entropy, offsets, targets, g_lp, g_ent)
    for x, copy in zip(inputs, copies):
        assert torch.equal(x, copy)


@pytest.mark.parametrize("device", DEVICES)
def test_registration_passes_opcheck(device):
    logits, offsets, targets, g_lp, g_ent = problem(3, 40, torch.float32, device)
    logits = logits.contiguous()
    lse, entropy = torch.ops.dualkv.token_scores_forward(logits, 1.0)
    torch.library.opcheck(torch.ops.dualkv.token_scores_forward.default, (logits, 1.0))
    uses = tuple(x.to(device) for x in (offsets, targets, g_lp, g_ent))
    torch.library.opcheck(torch.ops.dualkv.token_scores_backward.default, (logits, 1.0, lse, entropy, *uses))
