"""dualkv.attention (CPU, and CUDA where a GPU is present) against references written here from the mask definition alone:
a dense-mask attention and the per-response causal attention (the N-copy computation), both in
float64 with gradients from autograd."""

import pytest
import torch
import torch.nn.functional as F

import dualkv

# (prompt lengths, response lengths per group): several groups, ragged responses, R = 1, P = 1.
LAYOUTS = {
    "one_group": ([6], [[4, 1, 3]]),
    "three_groups_ragged": ([1, 5, 3], [[2, 1], [1, 6, 2, 3], [4]]),
    "single_response": ([4], [[5]]),
}
HEADS = 8
KV_HEADS = [8, 2, 1]  # GQA ratios 1, 4, 8
HEAD_DIM = 64  # compiled for the CUDA kernels too
NEEDS_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_GPU)]
# The CPU path takes every storage dtype; the CUDA kernels are compiled for float16 and bfloat16.
DEVICE_DTYPES = [
    pytest.param("cpu", dtype, id=f"cpu-{dtype}") for dtype in (torch.float32, torch.float16, torch.bfloat16)
] + [pytest.param("cuda", dtype, id=f"cuda-{dtype}", marks=NEEDS_GPU) for dtype in (torch.float16, torch.bfloat16)]


def hopper_kernels_run_here() -> bool:
    """Whether this machine's GPU runs the Hopper kernel family (compute capability 9.0)."""
    return torch.cuda.get_device_capability() == (9, 0)


def visibility_mask(prompt_lens, response_lens):
    """(T, T) bool, [query, key]: same group, key <= query, key in the prompt or in the query's
    own segment."""
    group, segment, in_prompt = [], [], []
    segments = [
        (g, length, is_prompt)
        for g, (prompt, responses) in enumerate(zip(prompt_lens, response_lens))
        for length, is_prompt in [(prompt, True)] + [(r, False) for r in responses]
    ]
    for s, (g, length, is_prompt) in enumerate(segments):
        group += [g] * length
        segment += [s] * length
        in_prompt += [is_prompt] * length
    group, segment, in_prompt = torch.tensor(group), torch.tensor(segment), torch.tensor(in_prompt)
    token = torch.arange(len(group))
    causal = token[None, :] <= token[:, None]
    same_group = group[:, None] == group[None, :]
    same_segment = segment[:, None] == segment[None, :]
    return same_group & causal & (in_prompt[None, :] | same_segment)


def dense_reference(q, k, v, mask, scale):
    """(out (T, H, d), lse (H, T)) by explicit softmax over the masked score matrix."""
    group_size = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group_size, dim=1)
    v = v.repeat_interleave(group_size, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
    return out, torch.logsumexp(scores, dim=-1)


def as_float64_leaf(tensor):
    return tensor.detach().cpu().double().requires_grad_()


def assert_close_to_reference(actual, expected, dtype):
    """The op accumulates in float32 and rounds to `dtype` its results and, on CUDA, the
    probabilities and score gradients it feeds to tensor cores: allow a few units in the last
    place of `dtype`, and no less than float32 accumulation over these short rows costs.
    NaN anywhere fails."""
    tolerance = max(8 * torch.finfo(dtype).eps, 64 * torch.finfo(torch.float32).eps)
    torch.testing.assert_close(actual.double(), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("device, dtype", DEVICE_DTYPES)
@pytest.mark.parametrize("kv_heads", KV_HEADS)
@pytest.mark.parametrize("layout_name", LAYOUTS)
def test_matches_dense_mask_reference(layout_name, kv_heads, dtype, device, make_qkv, generator):
    prompt_lens, response_lens = LAYOUTS[layout_name]
    layout = dualkv.Layout.from_lengths(prompt_lens, response_lens)
    q, k, v = (
        t.detach().to(device).requires_grad_() for t in make_qkv(layout.num_tokens, HEADS, kv_heads, HEAD_DIM, dtype)
    )
    dout = torch.randn(q.shape, generator=generator, dtype=torch.float64).to(dtype)

    out, lse = dualkv.attention_with_lse(q, k, v, layout)
    out.backward(dout.to(device))

    q64, k64, v64 = as_float64_leaf(q), as_float64_leaf(k), as_float64_leaf(v)
    mask = visibility_mask(prompt_lens, response_lens)
    expected_out, expected_lse = dense_reference(q64, k64, v64, mask, HEAD_DIM**-0.5)
    expected_out.backward(dout.double())

    assert out.dtype == dtype and lse.dtype == torch.float32
    assert out.device == lse.device == q.grad.device == q.device
    assert_close_to_reference(out.cpu(), expected_out, dtype)
    assert_close_to_reference(lse.cpu(), expected_lse, torch.float32)
    for name, actual, expected in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
        assert actual.dtype == dtype, name
        assert_close_to_reference(actual.cpu(), expected, dtype)


@pytest.mark.parametrize("layout_name", LAYOUTS)
def test_equals_per_response_causal_attention(layout_name, make_qkv, generator):
    """The layout's equivalence: response i's rows equal causal attention over [prompt; response_i],
    prompt rows equal causal attention over the prompt, and the prompt's dK/dV sum over copies.
    The N copies gather rows of one float64 leaf, so autograd performs that sum."""
    prompt_lens, response_lens = LAYOUTS[layout_name]
    layout = dualkv.Layout.from_lengths(prompt_lens, response_lens)
    q, k, v = make_qkv(layout.num_tokens, HEADS, 2, HEAD_DIM)
    dout = torch.randn(q.shape, generator=generator)
    out = dualkv.attention(q, k, v, layout)
    out.backward(dout)

    q64, k64, v64 = as_float64_leaf(q), as_float64_leaf(k), as_float64_leaf(v)
    # Packed order is: the first copy's prompt and response rows, then each further copy's
    # response rows. The packed batch holds a prompt row once, so it takes its value (and its
    # upstream gradient) from the first copy; the other copies compute the same rows.
    pieces = []
    start = 0
    for prompt, responses in zip(prompt_lens, response_lens):
        prompt_rows = torch.arange(start, start + prompt)
        start += prompt
        for copy, length in enumerate(responses):
            rows = torch.cat([prompt_rows, torch.arange(start, start + length)])
            copy_out = F.scaled_dot_product_attention(
                q64[rows].transpose(0, 1),
                k64[rows].transpose(0, 1),
                v64[rows].transpose(0, 1),
                is_causal=True,
                enable_gqa=True,
            ).transpose(0, 1)
            pieces.append(copy_out if copy == 0 else copy_out[prompt:])
            start += length
    expected_out = torch.cat(pieces)
    expected_out.backward(dout.double())

    assert_close_to_reference(out, expected_out, torch.float32)
    for actual, expected in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        assert_close_to_reference(actual, expected, torch.float32)


def test_strided_views_of_a_fused_qkv_projection(generator):
    """q, k, v as column slices of one (T, H + 2 Hk, d) buffer, the gradient landing in that
    buffer; explicit softmax_scale and deterministic backward."""
    prompt_lens, response_lens = LAYOUTS["three_groups_ragged"]
    layout = dualkv.Layout.from_lengths(prompt_lens, response_lens)
    kv_heads, scale = 2, 0.3
    qkv = torch.randn(layout.num_tokens, HEADS + 2 * kv_heads, HEAD_DIM, generator=generator).requires_grad_()
    q, k, v = qkv.split([HEADS, kv_heads, kv_heads], dim=1)
    assert not q.is_contiguous() and q.stride(-1) == 1
    dout = torch.randn(q.shape, generator=generator)
    out, lse = dualkv.attention_with_lse(q, k, v, layout, softmax_scale=scale, deterministic=True)
    out.backward(dout)

    qkv64 = as_float64_leaf(qkv)
    q64, k64, v64 = qkv64.split([HEADS, kv_heads, kv_heads], dim=1)
    expected_out, expected_lse = dense_reference(q64, k64, v64, visibility_mask(prompt_lens, response_lens), scale)
    expected_out.backward(dout.double())

    assert_close_to_reference(out, expected_out, torch.float32)
    assert_close_to_reference(lse, expected_lse, torch.float32)
    assert_close_to_reference(qkv.grad, qkv64.grad, torch.float32)


def test_head_major_inputs(generator):
    """(H, T, d) buffers seen as (T, H, d): token stride d, head stride T * d."""
    prompt_lens, response_lens = LAYOUTS["one_group"]
    layout = dualkv.Layout.from_lengths(prompt_lens, response_lens)
    q, k, v = (
        torch.randn(heads, layout.num_tokens, HEAD_DIM, generator=generator).transpose(0, 1) for heads in (HEADS, 2, 2)
    )
    out = dualkv.attention(q, k, v, layout)
    expected_out, _ = dense_reference(
        q.double(), k.double(), v.double(), visibility_mask(prompt_lens, response_lens), HEAD_DIM**-0.5
    )
    assert_close_to_reference(out, expected_out, torch.float32)


def test_nan_propagates_to_exactly_the_queries_that_see_it(make_qkv):
    """A NaN key in group 1's prompt poisons the queries of its kv head that see it, and nothing
    else."""
    prompt_lens, response_lens = LAYOUTS["three_groups_ragged"]
    layout = dualkv.Layout.from_lengths(prompt_lens, response_lens)
    q, k, v = (t.detach() for t in make_qkv(layout.num_tokens, HEADS, 2, HEAD_DIM))
    poisoned_token = prompt_lens[0] + sum(response_lens[0]) + 2
    k[poisoned_token, 1, 3] = float("nan")

    out = dualkv.attention(q, k, v, layout)
    expected_out, _ = dense_reference(
        q.double(), k.double(), v.double(), visibility_mask(prompt_lens, response_lens), HEAD_DIM**-0.5
    )
    assert expected_out.isnan().any() and not expected_out.isnan().all()
    assert torch.equal(out.isnan(), expected_out.isnan())


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_backward_is_bitwise_reproducible(device, generator):
    """Long enough segments that the CUDA backward splits every key range over many tiles, where
    an unordered reduction would show."""
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    layout = dualkv.Layout.from_lengths([300, 40], [[200, 150, 1], [90]])
    q, k, v = (
        torch.randn(layout.num_tokens, heads, HEAD_DIM, generator=generator).to(device, dtype).requires_grad_()
        for heads in (HEADS, 2, 2)
    )
    dout = torch.randn(q.shape, generator=generator).to(device, dtype)
    runs = []
    for _ in range(2):
        q.grad = k.grad = v.grad = None
        dualkv.attention(q, k, v, layout, deterministic=True).backward(dout)
        runs.append((q.grad, k.grad, v.grad))
    for first, second in zip(*runs):
        assert torch.equal(first, second)


AUTOCAST = [pytest.param("cpu", torch.bfloat16, id="cpu-bf16")] + [
    pytest.param("cuda", dtype, id=f"cuda-{dtype}", marks=NEEDS_GPU) for dtype in (torch.float16, torch.bfloat16)
]


@pytest.mark.parametrize("device, dtype", AUTOCAST)
def test_autocast_casts_the_inputs_like_sdpa(device, dtype, make_qkv, generator):
    """Under torch.autocast, fp32 q and k beside v already in the autocast dtype (a model's fp32
    q/k norms under mixed precision): the call runs in the autocast dtype, equals the call on inputs
    cast by hand bit for bit, and gradients return in each input's own dtype."""
    layout = dualkv.Layout.from_lengths(*LAYOUTS["three_groups_ragged"])
    q, k, v = (t.detach().to(device) for t in make_qkv(layout.num_tokens, HEADS, 2, HEAD_DIM))
    v = v.to(dtype)
    dout = torch.randn(q.shape, generator=generator).to(device, dtype)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with torch.autocast(device, dtype=dtype):
        out = dualkv.attention(*leaves, layout)
    out.backward(dout)
    cast = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    expected = dualkv.attention(*cast, layout)
    expected.backward(dout)
    assert out.dtype == dtype and torch.equal(out, expected)
    for leaf, by_hand in zip(leaves, cast):
        assert leaf.grad.dtype == leaf.dtype
        assert torch.equal(leaf.grad, by_hand.grad.to(leaf.dtype))


@pytest.mark.parametrize("family", ["portable", "hopper"])
@NEEDS_GPU
def test_torch_deterministic_algorithms_select_the_deterministic_backward(family, generator):
    """With torch.use_deterministic_algorithms(True) the default backward is the deterministic one:
    its gradients equal deterministic=True's bit for bit. The layout is the one above, whose dQ rows
    sum many key tiles: the atomic backward adds them in another grouping, which shows in the bits."""
    if family == "hopper" and not hopper_kernels_run_here():
        pytest.skip("the Hopper kernels need compute capability 9.0")
    layout = dualkv.Layout.from_lengths([300, 40], [[200, 150, 1], [90]])
    q, k, v = (
        torch.randn(layout.num_tokens, heads, HEAD_DIM, generator=generator).to("cuda", torch.bfloat16).requires_grad_()
        for heads in (HEADS, 2, 2)
    )
    dout = torch.randn(q.shape, generator=generator).to("cuda", torch.bfloat16)

    def gradients(deterministic):
        q.grad = k.grad = v.grad = None
        dualkv.attention(q, k, v, layout, deterministic=deterministic, kernel_family=family).backward(dout)
        return q.grad, k.grad, v.grad

    reference = gradients(True)
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        chosen = gradients(False)
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    for name, actual, expected in zip(("dq", "dk", "dv"), chosen, reference):
        assert torch.equal(actual, expected), name


@pytest.mark.parametrize(
    "device, dtype", [("cpu", torch.float32), pytest.param("cuda", torch.float16, marks=NEEDS_GPU)]
)
def test_offsets_changed_in_place_are_not_served_from_the_cache(device, dtype, make_qkv):
    """The operator keeps one C++ layout, with its device plans, per pair of layout tensors while
    they live (python/csrc/layout_registry.h). Offsets written into the same tensors between two
    calls are another layout: the second call follows them."""
    cu_seqlens = torch.tensor([0, 4, 7, 12], dtype=torch.int32)  # prompt 4, responses 3 and 5
    parents = torch.tensor([-1, 0, 0], dtype=torch.int32)
    q, k, v = (t.detach().to(device) for t in make_qkv(12, HEADS, 2, HEAD_DIM, dtype))
    first, _ = torch.ops.dualkv.attention_forward(q, k, v, cu_seqlens, parents, None, False)
    again, _ = torch.ops.dualkv.attention_forward(q, k, v, cu_seqlens, parents, None, False)
    assert torch.equal(first, again)

    cu_seqlens.copy_(torch.tensor([0, 6, 8, 12], dtype=torch.int32))  # prompt 6, responses 2 and 4
    changed, _ = torch.ops.dualkv.attention_forward(q, k, v, cu_seqlens, parents, None, False)
    expected, _ = dense_reference(
        q.cpu().double(), k.cpu().double(), v.cpu().double(), visibility_mask([6], [[2, 4]]), HEAD_DIM**-0.5
    )
    assert_close_to_reference(changed.cpu(), expected, dtype)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@NEEDS_GPU
def test_each_kernel_family_matches_the_reference(dtype, deterministic, make_qkv, generator):
    """The forward and backward of each CUDA kernel family, forced through kernel_family (autograd
    hands it to the backward), against the dense-mask reference; a family this GPU lacks (Hopper
    off compute capability 9.0) is an error naming it."""
    prompt_lens, response_lens = LAYOUTS["three_groups_ragged"]
    layout = dualkv.Layout.from_lengths(prompt_lens, response_lens)
    q, k, v = (t.detach().cuda().requires_grad_() for t in make_qkv(layout.num_tokens, HEADS, 2, HEAD_DIM, dtype))
    dout = torch.randn(q.shape, generator=generator, dtype=torch.float64).to(dtype)
    q64, k64, v64 = as_float64_leaf(q), as_float64_leaf(k), as_float64_leaf(v)
    mask = visibility_mask(prompt_lens, response_lens)
    expected_out, expected_lse = dense_reference(q64, k64, v64, mask, HEAD_DIM**-0.5)
    expected_out.backward(dout.double())
    for family in ("portable", "hopper"):
        if family == "hopper" and not hopper_kernels_run_here():
            with pytest.raises(ValueError, match="kernel_family"):
                dualkv.attention(q, k, v, layout, kernel_family=family)
            continue
        q.grad = k.grad = v.grad = None
        out, lse = dualkv.attention_with_lse(q, k, v, layout, deterministic=deterministic, kernel_family=family)
        out.backward(dout.cuda())
        assert_close_to_reference(out.cpu(), expected_out, dtype)
        assert_close_to_reference(lse.cpu(), expected_lse, torch.float32)
        for actual, expected in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
            assert_close_to_reference(actual.cpu(), expected, dtype)
