"""dualkv.response_logprobs(_from_hidden) against log-probs of an N-copy forward, computed naively."""

import random

import pytest
import torch

import dualkv

VOCAB = 37
DIM = 8
SHAPES = [(5, [3, 1, 4]), (1, [2, 2]), (3, [1]), (4, [6, 2, 5])]


def _rollouts(seed, shapes=SHAPES):
    rng = random.Random(seed)
    prompts = [[rng.randrange(VOCAB) for _ in range(p)] for p, _ in shapes]
    responses = [[[rng.randrange(VOCAB) for _ in range(r)] for r in rs] for _, rs in shapes]
    return prompts, responses


class ToyCausalModel(torch.nn.Module):
    """A model whose logits depend only on the visible context: h_t = sum over visible k of
    (E[x_k] + Pos[pos_k]); logits = tanh(h) @ W^T. Enough to make every row's logits differ and
    to route gradients to the prompt through every response, like attention does."""

    def __init__(self, seed):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Parameter(torch.randn(VOCAB, DIM, generator=gen, dtype=torch.float64) * 0.5)
        self.pos = torch.nn.Parameter(torch.randn(64, DIM, generator=gen, dtype=torch.float64) * 0.5)
        self.head = torch.nn.Parameter(torch.randn(VOCAB, DIM, generator=gen, dtype=torch.float64))

    def hidden(self, ids, positions, visible):
        return torch.tanh(visible.to(torch.float64) @ (self.embed[ids] + self.pos[positions]))

    def forward(self, ids, positions, visible):
        return self.hidden(ids, positions, visible) @ self.head.T


def _packed_visibility(prompts, responses):
    """The shared-prompt mask written from its definition: query q sees key k iff k <= q, same
    group, and k is in the group's prompt or in q's own segment."""
    group_of, segment_of, in_prompt = [], [], []
    segment = 0
    for g, (prompt, group) in enumerate(zip(prompts, responses)):
        for s, length in enumerate([len(prompt)] + [len(r) for r in group]):
            group_of += [g] * length
            segment_of += [segment] * length
            in_prompt += [s == 0] * length
            segment += 1
    group_of, segment_of, in_prompt = map(torch.tensor, (group_of, segment_of, in_prompt))
    causal = torch.ones(group_of.numel(), group_of.numel(), dtype=torch.bool).tril()
    same_group = group_of[:, None] == group_of[None, :]
    own_segment = segment_of[:, None] == segment_of[None, :]
    return causal & same_group & (in_prompt[None, :] | own_segment)


def _ncopy_logprobs(model, prompts, responses):
    """Naive per-response log-probs and entropies: one causal forward per [prompt; response] row,
    log_softmax in float64, token c scored from row c - 1."""
    logprobs, entropies = [], []
    for prompt, group in zip(prompts, responses):
        for response in group:
            ids = torch.tensor(prompt + response)
            n = ids.numel()
            logits = model(ids, torch.arange(n), torch.ones(n, n, dtype=torch.bool).tril())
            log_p = torch.log_softmax(logits, dim=-1)
            rows = range(len(prompt) - 1, n - 1)
            logprobs.append(torch.stack([log_p[c, ids[c + 1]] for c in rows]))
            entropies.append(torch.stack([-(log_p[c].exp() * log_p[c]).sum() for c in rows]))
    return logprobs, entropies


def _to_layout(per_response, max_len):
    out = torch.zeros(len(per_response), max_len, dtype=per_response[0].dtype)
    for i, values in enumerate(per_response):
        out[i, : values.numel()] = values
    return out


@pytest.mark.parametrize("chunk_rows", [None, 1, 4])
def test_packed_logprobs_and_gradients_equal_ncopy(chunk_rows):
    prompts, responses = _rollouts(0)
    packed = dualkv.pack(prompts, responses)
    packed_model, ncopy_model = ToyCausalModel(1), ToyCausalModel(1)

    logits = packed_model(packed.input_ids[0], packed.position_ids[0], _packed_visibility(prompts, responses))
    logprobs, entropy = dualkv.response_logprobs(logits.float(), packed, return_entropy=True, chunk_rows=chunk_rows)
    naive_logprobs, naive_entropy = _ncopy_logprobs(ncopy_model, prompts, responses)
    expected_logprobs = _to_layout(naive_logprobs, packed.max_response_length)
    expected_entropy = _to_layout(naive_entropy, packed.max_response_length)
    assert logprobs.dtype == entropy.dtype == torch.float32
    assert logprobs.shape == (packed.num_responses, packed.max_response_length)
    torch.testing.assert_close(logprobs, expected_logprobs.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy.float(), rtol=1e-5, atol=1e-5)
    assert torch.all(logprobs[~packed.response_mask] == 0) and torch.all(entropy[~packed.response_mask] == 0)

    # A loss touching every token through both outputs: the parameters' gradients (the shared
    # prompt rows feed all N first tokens) must equal the N-copy ones.
    weights = torch.randn(logprobs.shape, generator=torch.Generator().manual_seed(2))
    ((logprobs * weights).sum() + 0.3 * (entropy * weights).sum()).backward()
    ((expected_logprobs * weights).sum() + 0.3 * (expected_entropy * weights).sum()).backward()
    for packed_param, ncopy_param in zip(packed_model.parameters(), ncopy_model.parameters()):
        torch.testing.assert_close(packed_param.grad, ncopy_param.grad, rtol=1e-4, atol=1e-5)


def test_shared_prompt_row_gradient_is_the_sum_over_its_responses():
    prompts, responses = _rollouts(3, [(4, [2, 3, 1, 2])])
    packed = dualkv.pack(prompts, responses)
    logits = torch.randn(packed.num_tokens, VOCAB, requires_grad=True)
    dualkv.response_logprobs(logits, packed)[:, 0].sum().backward()
    last_prompt_row = logits[len(prompts[0]) - 1].detach()
    first_tokens = torch.tensor([r[0] for r in responses[0]])
    # d log p(t)/dz = onehot(t) - softmax(z), summed over the 4 responses' first tokens.
    expected = torch.nn.functional.one_hot(first_tokens, VOCAB).sum(0) - len(first_tokens) * last_prompt_row.softmax(-1)
    torch.testing.assert_close(logits.grad[len(prompts[0]) - 1], expected.float())
    assert torch.all(logits.grad[len(prompts[0]) :] == 0) and torch.all(logits.grad[: len(prompts[0]) - 1] == 0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk_rows", [None, 3])
def test_hidden_state_variant_equals_logits_variant(temperature, chunk_rows):
    prompts, responses = _rollouts(4)
    packed = dualkv.pack(prompts, responses)
    gen = torch.Generator().manual_seed(5)
    hidden = torch.randn(1, packed.num_tokens, DIM, generator=gen)
    weight = torch.randn(VOCAB, DIM, generator=gen)
    grads = []
    results = []
    for variant in ("logits", "hidden"):
        h = hidden.clone().requires_grad_()
        w = weight.clone().requires_grad_()
        if variant == "logits":
            out = dualkv.response_logprobs(h @ w.T, packed, temperature=temperature, return_entropy=True)
        else:
            out = dualkv.response_logprobs_from_hidden(
                h, w, packed, temperature=temperature, return_entropy=True, chunk_rows=chunk_rows
            )
        (out[0].sum() * 0.5 + (out[1] * out[0].detach()).sum()).backward()
        results.append(out)
        grads.append((h.grad, w.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # The two variants' fp32 logits differ by GEMM rounding (one product against chunked ones), so
    # the gradients agree to fp32 precision relative to their size (both are ~1e-6 of it from a
    # float64 reference).
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * float(b.abs().max()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_bf16_weight_gradient_on_cuda_is_as_accurate_as_on_the_cpu():
    """The CUDA path accumulates the LM head's weight gradient inside the GEMM (fp32 C): against a
    float64 reference on the same bf16 inputs, its error is at most twice the CPU path's (which
    rounds each chunk's product to bf16 first; the two paths round the logits differently), with a
    floor of a fraction of bf16's resolution."""
    prompts, responses = _rollouts(8, [(9, [7, 12, 1]), (4, [20, 5])])
    packed = dualkv.pack(prompts, responses)
    gen = torch.Generator().manual_seed(9)
    hidden = torch.randn(1, packed.num_tokens, 64, generator=gen).to(torch.bfloat16)
    weight = (torch.randn(1000, 64, generator=gen) / 8).to(torch.bfloat16)
    grads = {}
    for name, dtype, device in (("reference", torch.float64, "cpu"), ("cpu", torch.bfloat16, "cpu"),
                                ("cuda", torch.bfloat16, "cuda")):
        w = weight.to(device=device, dtype=dtype).detach().requires_grad_()
        logprobs, _ = dualkv.response_logprobs_from_hidden(
            hidden.to(device=device, dtype=dtype), w, packed, return_entropy=True, chunk_rows=5
        )
        logprobs.sum().backward()
        grads[name] = w.grad.to(device="cpu", dtype=torch.float64)
    cpu_error = (grads["cpu"] - grads["reference"]).abs().max()
    cuda_error = (grads["cuda"] - grads["reference"]).abs().max()
    floor = torch.finfo(torch.bfloat16).eps / 32 * grads["reference"].abs().max()
    assert torch.isfinite(grads["cuda"]).all()
    assert cuda_error <= 2 * cpu_error + floor, (cuda_error, cpu_error)


def test_temperature_scales_logits_before_the_softmax():
    prompts, responses = _rollouts(6)
    packed = dualkv.pack(prompts, responses)
    logits = torch.randn(packed.num_tokens, VOCAB, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(
        dualkv.response_logprobs(logits, packed, temperature=0.5), dualkv.response_logprobs(logits * 2, packed)
    )


def test_low_precision_logits_use_an_fp32_softmax():
    prompts, responses = _rollouts(8)
    packed = dualkv.pack(prompts, responses)
    logits = (torch.randn(1, packed.num_tokens, VOCAB, generator=torch.Generator().manual_seed(9)) * 8).bfloat16()
    got = dualkv.response_logprobs(logits, packed)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, dualkv.response_logprobs(logits.float(), packed), rtol=0, atol=1e-5)


def test_masked_vocabulary_gives_finite_entropy_and_gradients():
    prompts, responses = _rollouts(10)
    allowed = VOCAB - 5
    packed = dualkv.pack(
        [[t % allowed for t in p] for p in prompts], [[[t % allowed for t in r] for r in g] for g in responses]
    )
    logits = torch.randn(packed.num_tokens, VOCAB)
    logits[:, allowed:] = float("-inf")  # a vocabulary mask: no sampled token lies there
    logits.requires_grad_()
    logprobs, entropy = dualkv.response_logprobs(logits, packed, return_entropy=True)
    (logprobs.sum() + entropy.sum()).backward()
    assert torch.isfinite(logprobs).all() and torch.isfinite(entropy).all() and torch.isfinite(logits.grad).all()


def test_nan_logits_propagate():
    prompts, responses = _rollouts(11)
    packed = dualkv.pack(prompts, responses)
    logits = torch.randn(packed.num_tokens, VOCAB)
    logits[int(packed.score_rows[0, 0]), 3] = float("nan")
    assert torch.isnan(dualkv.response_logprobs(logits, packed)[0, 0])


def test_meta_tensors_are_named():
    packed = dualkv.pack(*_rollouts(14))
    with pytest.raises(ValueError, match="^logits: a tensor on the meta device holds no values"):
        dualkv.response_logprobs(torch.empty(1, packed.num_tokens, VOCAB, device="meta"), packed)
    with pytest.raises(ValueError, match="^hidden_states: a tensor on the meta device holds no values"):
        hidden = torch.empty(packed.num_tokens, 8, device="meta")
        dualkv.response_logprobs_from_hidden(hidden, torch.zeros(VOCAB, 8), packed)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p, x: dualkv.response_logprobs(x[:-1], p), "logits: expected"),
        (lambda p, x: dualkv.response_logprobs(x, p, temperature=0.0), "temperature"),
        (lambda p, x: dualkv.response_logprobs(x[:, :3], p), r"vocabulary"),
        (lambda p, x: dualkv.response_logprobs(x, p, chunk_rows=0), "chunk_rows"),
        # An infinite temperature would make every distribution uniform.
        (lambda p, x: dualkv.response_logprobs(x, p, temperature=float("inf")), "temperature: must be finite"),
        (lambda p, x: dualkv.response_logprobs_from_hidden(x, torch.zeros(VOCAB, 5), p), "lm_head_weight"),
        (
            lambda p, x: dualkv.response_logprobs_from_hidden(x[None, :-2], torch.zeros(VOCAB, VOCAB), p),
            "hidden_states",
        ),
    ],
)
def test_bad_arguments_name_the_argument(call, message):
    prompts, responses = _rollouts(12)
    packed = dualkv.pack(prompts, responses)
    with pytest.raises(ValueError, match=message):
        call(packed, torch.randn(packed.num_tokens, VOCAB))


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda p, x: dualkv.response_logprobs(x, p, chunk_rows=True), "chunk_rows"),
        (lambda p, x: dualkv.response_logprobs(x, p, chunk_rows=2.5), "chunk_rows"),
        (lambda p, x: dualkv.response_logprobs(x, p.layout), "packed"),
        (lambda p, x: dualkv.response_logprobs(x, p, temperature="1.0"), "temperature"),
        (lambda p, x: dualkv.response_logprobs(x, p, temperature=None), "temperature"),
        (lambda p, x: dualkv.response_logprobs(x.tolist(), p), "logits"),
        (lambda p, x: dualkv.response_logprobs_from_hidden(x, x.tolist(), p), "lm_head_weight"),
    ],
)
def test_wrong_types_name_the_argument(call, argument):
    prompts, responses = _rollouts(13)
    packed = dualkv.pack(prompts, responses)
    with pytest.raises(TypeError, match=f"^{argument}: expected"):
        call(packed, torch.randn(packed.num_tokens, VOCAB))
