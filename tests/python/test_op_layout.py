"""dualkv.Layout: offsets, properties and per-token helpers against sums and loops over the
lengths; validation errors name the argument."""

import copy
import itertools
import pickle
import re

import numpy as np
import pytest
import torch

import dualkv

PROMPT_LENS = [1, 5, 3]
RESPONSE_LENS = [[2, 1], [1, 6, 2, 3], [4]]


def expected_offsets(prompt_lens, response_lens):
    segment_lengths = [length for p, rs in zip(prompt_lens, response_lens) for length in [p, *rs]]
    cu_seqlens = [0, *itertools.accumulate(segment_lengths)]
    cu_groups = [0, *itertools.accumulate(1 + len(rs) for rs in response_lens)]
    return cu_seqlens, cu_groups


def per_token_loop(prompt_lens, response_lens):
    """(segment id, group id, position id) of every packed token, by walking the batch."""
    segment_ids, group_ids, position_ids = [], [], []
    segment = 0
    for group, (prompt, responses) in enumerate(zip(prompt_lens, response_lens)):
        for length, first_position in [(prompt, 0)] + [(r, prompt) for r in responses]:
            segment_ids += [segment] * length
            group_ids += [group] * length
            position_ids += range(first_position, first_position + length)
            segment += 1
    return segment_ids, group_ids, position_ids


def test_from_lengths_offsets_and_properties():
    layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS)
    cu_seqlens, cu_groups = expected_offsets(PROMPT_LENS, RESPONSE_LENS)
    for tensor, expected in ((layout.cu_seqlens, cu_seqlens), (layout.cu_groups, cu_groups)):
        assert tensor.dtype == torch.int32 and tensor.device.type == "cpu"
        assert tensor.tolist() == expected
    assert layout.num_groups == len(PROMPT_LENS)
    assert layout.num_segments == len(cu_seqlens) - 1
    assert layout.num_tokens == cu_seqlens[-1]
    assert layout.prompt_lengths == PROMPT_LENS
    assert layout.response_lengths == RESPONSE_LENS


def test_per_token_helpers():
    layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS)
    segment_ids, group_ids, position_ids = per_token_loop(PROMPT_LENS, RESPONSE_LENS)
    assert layout.segment_ids.tolist() == segment_ids
    assert layout.group_ids.tolist() == group_ids
    assert layout.position_ids.tolist() == position_ids
    assert layout.position_ids.dtype == torch.int64


@pytest.mark.parametrize(
    "convert",
    [lambda x: x, torch.tensor, lambda x: torch.tensor(x, dtype=torch.int32), tuple],
    ids=["list", "int64_tensor", "int32_tensor", "tuple"],
)
def test_from_offsets_accepts_sequences_and_integer_tensors(convert):
    cu_seqlens, cu_groups = expected_offsets(PROMPT_LENS, RESPONSE_LENS)
    layout = dualkv.Layout.from_offsets(convert(cu_seqlens), convert(cu_groups))
    assert layout.cu_seqlens.dtype == torch.int32
    assert layout.prompt_lengths == PROMPT_LENS
    assert layout.response_lengths == RESPONSE_LENS


def test_to_device_moves_helpers_not_offsets():
    layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS).to("meta")
    assert layout.device == torch.device("meta")
    assert layout.position_ids.device.type == "meta" and layout.position_ids.shape == (layout.num_tokens,)
    assert layout.cu_seqlens.device.type == "cpu"


@pytest.mark.parametrize(
    "prompt_lens, response_lens, argument",
    [
        ([3, 0], [[1], [2]], "prompt_lengths[1]"),
        ([3, 2], [[1], []], "response_lengths[1]"),
        ([3, 2], [[1], [2, -1]], "response_lengths[1][1]"),
        ([3, 2], [[1]], "response_lengths"),
        ([], [], "prompt_lengths"),
        ([2**31 - 2], [[2]], "response_lengths[0][0]"),
        ([2**30, 2**30], [[1], [1]], "prompt_lengths[1]"),
    ],
    ids=[
        "empty_prompt",
        "no_response",
        "negative_response",
        "group_count",
        "no_group",
        "int32_overflow",
        "sum_overflow",
    ],
)
def test_from_lengths_value_errors_name_the_argument(prompt_lens, response_lens, argument):
    with pytest.raises(ValueError, match=re.escape(f"invalid argument '{argument}'")):
        dualkv.Layout.from_lengths(prompt_lens, response_lens)


@pytest.mark.parametrize(
    "cu_seqlens, cu_groups, argument",
    [
        ([0, 3, 2, 6], [0, 3], "cu_seqlens[2]"),
        ([1, 3, 6], [0, 2], "cu_seqlens[0]"),
        ([0, 3, 4, 6], [0, 1, 3], "cu_groups[1]"),
        ([0, 3, 4, 6], [0, 2], "cu_groups[1]"),
    ],
    ids=["decreasing", "nonzero_start", "group_without_response", "groups_not_covering_segments"],
)
def test_from_offsets_value_errors_name_the_argument(cu_seqlens, cu_groups, argument):
    with pytest.raises(ValueError, match=re.escape(f"invalid argument '{argument}'")):
        dualkv.Layout.from_offsets(cu_seqlens, cu_groups)


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: dualkv.Layout.from_offsets(torch.tensor([0, 2, 2**31]), [0, 2]), r"cu_seqlens\[2\]"),
        (lambda: dualkv.Layout.from_offsets([0, 2, 2**64], [0, 2]), r"cu_seqlens\[2\]"),
        (lambda: dualkv.Layout.from_lengths([2**63], [[1]]), r"prompt_lengths\[0\]"),
        (lambda: dualkv.Layout.from_lengths([3], [[1, -(2**70)]]), r"response_lengths\[0\]\[1\]"),
    ],
    ids=["offset_tensor", "offset_past_int64", "length_past_int64", "negative_length_past_int64"],
)
def test_values_outside_int32_are_named(build, argument):
    with pytest.raises(ValueError, match=f"^{argument}: must fit in int32"):
        build()


def test_offsets_on_the_meta_device_are_named():
    with pytest.raises(ValueError, match="^cu_groups: a tensor on the meta device holds no values"):
        dualkv.Layout.from_offsets([0, 3, 5], torch.tensor([0, 2], device="meta"))


def test_numpy_lengths_and_offsets_are_accepted():
    layout = dualkv.Layout.from_lengths(np.array(PROMPT_LENS), [np.array(r, dtype=np.int32) for r in RESPONSE_LENS])
    assert (layout.prompt_lengths, layout.response_lengths) == (PROMPT_LENS, RESPONSE_LENS)
    cu_seqlens, cu_groups = (np.array(x) for x in expected_offsets(PROMPT_LENS, RESPONSE_LENS))
    assert dualkv.Layout.from_offsets(cu_seqlens, cu_groups).response_lengths == RESPONSE_LENS


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: dualkv.Layout.from_lengths(3, [[1]]), "prompt_lengths"),
        (lambda: dualkv.Layout.from_lengths(torch.tensor(3), [[1]]), "prompt_lengths"),
        (lambda: dualkv.Layout.from_lengths([3.0], [[1]]), r"prompt_lengths\[0\]"),
        (lambda: dualkv.Layout.from_lengths(np.array([3.0]), [[1]]), r"prompt_lengths\[0\]"),
        (lambda: dualkv.Layout.from_lengths([3], [[True]]), r"response_lengths\[0\]\[0\]"),
        (lambda: dualkv.Layout.from_lengths([3], ["ab"]), r"response_lengths\[0\]"),
        (lambda: dualkv.Layout.from_offsets([0, 1.5, 3], [0, 2]), r"cu_seqlens\[1\]"),
        (lambda: dualkv.Layout.from_offsets([0, 1, 3], torch.tensor([0.0, 2.0])), "cu_groups"),
    ],
    ids=[
        "prompt_not_sequence",
        "prompt_0d_tensor",
        "float_length",
        "float_numpy_length",
        "bool_length",
        "string_group",
        "float_offset",
        "float_tensor",
    ],
)
def test_wrong_types_raise_type_error_naming_the_argument(build, argument):
    with pytest.raises(TypeError, match=f"^{argument}:"):
        build()


def test_writes_to_returned_values_leave_the_layout_unchanged(make_qkv):
    """Properties return copies: an in-place write cannot make attention and the cached
    per-token helpers disagree about the layout."""
    layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS)
    q, k, v = (t.detach() for t in make_qkv(layout.num_tokens, 2, 1, 8))
    expected_out = dualkv.attention(q, k, v, layout)
    _, _, expected_positions = per_token_loop(PROMPT_LENS, RESPONSE_LENS)

    layout.cu_seqlens[1] = 3
    layout.cu_groups[1] = 2
    layout.position_ids[:] = 0
    layout.segment_ids[:] = 0
    layout.group_ids[:] = 0
    layout.prompt_lengths[0] = 7
    layout.response_lengths[0][0] = 7

    assert layout.cu_seqlens.tolist() == expected_offsets(PROMPT_LENS, RESPONSE_LENS)[0]
    assert layout.cu_groups.tolist() == expected_offsets(PROMPT_LENS, RESPONSE_LENS)[1]
    assert layout.position_ids.tolist() == expected_positions
    assert (layout.prompt_lengths, layout.response_lengths) == (PROMPT_LENS, RESPONSE_LENS)
    assert torch.equal(dualkv.attention(q, k, v, layout), expected_out)


def test_offsets_are_copied_from_the_callers_tensors():
    cu_seqlens, cu_groups = (torch.tensor(x, dtype=torch.int32) for x in expected_offsets(PROMPT_LENS, RESPONSE_LENS))
    layout = dualkv.Layout.from_offsets(cu_seqlens, cu_groups)
    cu_seqlens[1] = 0
    assert layout.prompt_lengths == PROMPT_LENS and layout.cu_seqlens[1] == PROMPT_LENS[0]


@pytest.mark.parametrize("name", ["cu_seqlens", "position_ids", "prompt_lengths", "_cu_seqlens", "anything"])
def test_attributes_cannot_be_set_or_deleted(name):
    layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS)
    with pytest.raises(AttributeError, match="immutable"):
        setattr(layout, name, None)
    with pytest.raises(AttributeError, match="immutable"):
        delattr(layout, name)


def test_copy_and_pickle_round_trip():
    layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS, device="meta")
    layout.position_ids  # noqa: B018  (fills a cache that the copies must not need)
    for copied in (copy.deepcopy(layout), pickle.loads(pickle.dumps(layout))):
        assert copied.cu_seqlens.tolist() == layout.cu_seqlens.tolist()
        assert copied.cu_groups.tolist() == layout.cu_groups.tolist()
        assert copied.device == layout.device


def test_layout_built_in_inference_mode_serves_training():
    """Rollouts often run under torch.inference_mode; autograd saves the offsets for backward."""
    with torch.inference_mode():
        layout = dualkv.Layout.from_lengths(PROMPT_LENS, RESPONSE_LENS)
    q = torch.randn(layout.num_tokens, 2, 8, requires_grad=True)
    dualkv.attention(q, q.detach()[:, :1], q.detach()[:, :1], layout).sum().backward()
    assert q.grad.isfinite().all()
