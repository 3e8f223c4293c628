"""Bad input raises an error naming the argument and the rule; inputs are never modified."""

import re

import pytest
import torch

import dualkv

HEADS, KV_HEADS, HEAD_DIM = 4, 2, 8


@pytest.fixture
def layout():
    return dualkv.Layout.from_lengths([3, 2], [[2, 1], [4]])


@pytest.fixture
def qkv(layout, make_qkv):
    return tuple(t.detach() for t in make_qkv(layout.num_tokens, HEADS, KV_HEADS, HEAD_DIM))


def names(argument):
    """The core's and the binding's message form: dualkv: invalid argument 'ARG': RULE."""
    return re.escape(f"invalid argument '{argument}'")


@pytest.mark.parametrize(
    "change, argument, rule",
    [
        (lambda q, k, v: (q[:, 0], k, v), "q", "3 dimensions"),
        (lambda q, k, v: (q, k[None], v), "k", "3 dimensions"),
        (lambda q, k, v: (q[:, :3], k, v), "q.heads", "multiple of k.heads"),
        (lambda q, k, v: (q, k.half(), v), "k.dtype", "must match q.dtype"),
        (lambda q, k, v: (q, k, v.bfloat16()), "v.dtype", "must match q.dtype"),
        (lambda q, k, v: (q.double(), k.double(), v.double()), "q", "float32, float16 or bfloat16"),
        (lambda q, k, v: (q[:-1], k[:-1], v[:-1]), "q.tokens", "total_tokens"),
        (lambda q, k, v: (q, k, v[:, :1]), "v.heads", "k.heads"),
        (lambda q, k, v: (q, k[..., :4], v), "k.head_dim", "q.head_dim"),
        # Empty tensors have null data pointers; the default scale of head_dim 0 is infinite.
        (lambda q, k, v: (q[:0], k, v), "q.tokens", "total_tokens"),
        (lambda q, k, v: (q[:, :0], k, v), "q.heads", ">= 1"),
        (lambda q, k, v: (q[..., :0], k[..., :0], v[..., :0]), "q.head_dim", r"\[1, 256\]"),
    ],
    ids=[
        "q_2d",
        "k_4d",
        "heads_not_multiple",
        "k_half",
        "v_bf16",
        "float64",
        "tokens_mismatch",
        "v_heads",
        "k_head_dim",
        "q_no_tokens",
        "q_no_heads",
        "head_dim_0",
    ],
)
def test_bad_tensors_raise_value_error_naming_the_argument(change, argument, rule, qkv, layout):
    with pytest.raises(ValueError, match=names(argument) + ".*" + rule):
        dualkv.attention(*change(*qkv), layout)


@pytest.mark.parametrize("softmax_scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_softmax_scale_raises_value_error(softmax_scale, qkv, layout):
    with pytest.raises(ValueError, match=names("softmax_scale")):
        dualkv.attention(*qkv, layout, softmax_scale=softmax_scale)


@pytest.mark.parametrize(
    "arguments, argument",
    [
        (lambda q, k, v, layout: (q.numpy(), k, v, layout), "q"),
        (lambda q, k, v, layout: (q, k, v, (layout.cu_seqlens, layout.parents)), "layout"),
    ],
    ids=["q_not_tensor", "layout_not_layout"],
)
def test_wrong_python_types_raise_type_error_naming_the_argument(arguments, argument, qkv, layout):
    with pytest.raises(TypeError, match=f"^{argument}:"):
        dualkv.attention(*arguments(*qkv, layout))


@pytest.mark.parametrize("keyword, value", [("softmax_scale", "0.5"), ("softmax_scale", True), ("deterministic", 1)])
def test_wrong_option_types_raise_type_error(keyword, value, qkv, layout):
    with pytest.raises(TypeError, match=f"^{keyword}:"):
        dualkv.attention(*qkv, layout, **{keyword: value})


@pytest.mark.parametrize(
    "cu_seqlens, parents, argument",
    [
        (torch.tensor([0, 3, 5, 6, 8, 12]).int(), torch.tensor([-1, 0, 0, -1, 3]).long(), "parents"),
        (torch.tensor([0, 3, 5, 6, 8, 12]).float(), torch.tensor([-1, 0, 0, -1, 3]).int(), "cu_seqlens"),
        (torch.tensor([[0, 3, 5, 6, 8, 12]]).int(), torch.tensor([-1, 0, 0, -1, 3]).int(), "cu_seqlens"),
    ],
    ids=["parents_int64", "seqlens_float", "seqlens_2d"],
)
def test_operator_rejects_malformed_layout_tensors(cu_seqlens, parents, argument, qkv):
    with pytest.raises(ValueError, match=names(argument)):
        torch.ops.dualkv.attention_forward(*qkv, cu_seqlens, parents, None, False)


def test_operator_validates_offsets(qkv):
    cu_seqlens = torch.tensor([0, 3, 5, 5, 8, 12], dtype=torch.int32)  # an empty segment
    parents = torch.tensor([-1, 0, 0, -1, 3], dtype=torch.int32)
    with pytest.raises(ValueError, match=names("cu_seqlens[3]") + ".*strictly increasing"):
        torch.ops.dualkv.attention_forward(*qkv, cu_seqlens, parents, None, False)


def test_operator_validates_parents(qkv):
    cu_seqlens = torch.tensor([0, 3, 5, 6, 8, 12], dtype=torch.int32)
    parents = torch.tensor([-1, 0, 4, -1, 3], dtype=torch.int32)  # segment 2's parent comes after it
    with pytest.raises(ValueError, match=names("parents[2]") + ".*must be < 2"):
        torch.ops.dualkv.attention_forward(*qkv, cu_seqlens, parents, None, False)


def test_backward_operator_names_its_arguments(qkv, layout):
    q, k, v = qkv
    out, lse = torch.ops.dualkv.attention_forward(q, k, v, layout.cu_seqlens, layout.parents, None, False)
    arguments = (out, q, k, v, out, lse, layout.cu_seqlens, layout.parents, None, False)
    with pytest.raises(ValueError, match=names("dout.tokens")):
        torch.ops.dualkv.attention_backward(out[:-1], *arguments[1:])
    with pytest.raises(ValueError, match=names("lse") + ".*float32"):
        torch.ops.dualkv.attention_backward(*arguments[:5], lse.double(), *arguments[6:])
    with pytest.raises(ValueError, match=names("lse.heads")):
        torch.ops.dualkv.attention_backward(*arguments[:5], lse[:1], *arguments[6:])


def test_inputs_are_not_modified(layout, generator):
    kv_heads = KV_HEADS
    qkv = torch.randn(layout.num_tokens, HEADS + 2 * kv_heads, HEAD_DIM, generator=generator).requires_grad_()
    dout = torch.randn(layout.num_tokens, HEADS, HEAD_DIM, generator=generator)
    before = qkv.detach().clone(), dout.clone(), layout.cu_seqlens.clone(), layout.parents.clone()

    q, k, v = qkv.split([HEADS, kv_heads, kv_heads], dim=1)
    dualkv.attention(q, k, v, layout).backward(dout)

    after = qkv.detach(), dout, layout.cu_seqlens, layout.parents
    for b, a in zip(before, after):
        assert torch.equal(b, a)


@pytest.mark.parametrize(
    "on_meta, argument",
    [("cu_seqlens", "cu_seqlens"), ("parents", "parents"), ("k", "k.device"), ("v", "v.device")],
)
def test_forward_with_one_meta_argument_is_an_error_not_uninitialised_memory(on_meta, argument, qkv, layout):
    """A meta tensor among real ones routes the call to the fake kernel, which must refuse it."""
    arguments = dict(zip("qkv", qkv), cu_seqlens=layout.cu_seqlens, parents=layout.parents)
    arguments[on_meta] = arguments[on_meta].to("meta")
    with pytest.raises(ValueError, match=names(argument)):
        torch.ops.dualkv.attention_forward(*arguments.values(), None, False)


@pytest.mark.parametrize("on_meta", ["dout", "out", "lse", "cu_seqlens"])
def test_backward_with_one_meta_argument_is_an_error_not_uninitialised_memory(on_meta, qkv, layout):
    q, k, v = qkv
    out, lse = torch.ops.dualkv.attention_forward(q, k, v, layout.cu_seqlens, layout.parents, None, False)
    names_in_order = ("dout", "q", "k", "v", "out", "lse", "cu_seqlens", "parents")
    arguments = dict(zip(names_in_order, (out, q, k, v, out, lse, layout.cu_seqlens, layout.parents)))
    arguments[on_meta] = arguments[on_meta].to("meta")
    with pytest.raises(ValueError, match=names(on_meta if on_meta == "cu_seqlens" else f"{on_meta}.device")):
        torch.ops.dualkv.attention_backward(*arguments.values(), None, False)


@pytest.mark.parametrize("argument", ["q", "k", "v"])
def test_the_python_entry_names_a_meta_tensor(argument, qkv, layout):
    """torch.ops.dualkv gives shapes on meta tensors (for tracing); dualkv.attention computes values,
    which a meta tensor does not have."""
    arguments = dict(zip("qkv", qkv))
    arguments[argument] = arguments[argument].detach().to("meta")
    with pytest.raises(ValueError, match=f"^{argument}: a tensor on the meta device holds no values"):
        dualkv.attention(*arguments.values(), layout)


def test_all_meta_tensors_give_shapes_for_tracing(qkv, layout):
    q, k, v = (t.to("meta") for t in qkv)
    out, lse = torch.ops.dualkv.attention_forward(q, k, v, layout.cu_seqlens, layout.parents, None, False)
    assert out.device.type == lse.device.type == "meta"
    assert out.shape == q.shape and lse.shape == (q.shape[1], q.shape[0])


def test_unknown_kernel_family_is_an_error_naming_it(qkv, layout):
    with pytest.raises(ValueError, match="kernel_family"):
        dualkv.attention(*qkv, layout, kernel_family="sm90")
    # Both operators check too (callers of torch.ops.dualkv skip the Python wrapper), also on the
    # CPU, which ignores a valid family.
    offsets = (layout.cu_seqlens, layout.parents)
    with pytest.raises(ValueError, match=names("kernel_family")):
        torch.ops.dualkv.attention_forward(*qkv, *offsets, None, False, "sm90")
    out, lse = torch.ops.dualkv.attention_forward(*qkv, *offsets, None, False)
    with pytest.raises(ValueError, match=names("kernel_family")):
        torch.ops.dualkv.attention_backward(out, *qkv, out, lse, *offsets, None, False, "sm90")
