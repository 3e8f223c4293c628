"""Property-based test of layout validation: random offsets and lengths, valid and invalid,
against a plain-Python statement of the rules (include/dualkv/layout.h).

Every Layout must be exactly the valid inputs; an invalid one must be a ValueError naming the
first entry that breaks a rule, in the order the rules are listed here. Examples are generated
from a fixed seed (derandomize) so that CI runs the same cases every time.
"""

import itertools
import re

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_op_attention import dense_reference, visibility_mask

import dualkv

INT32_MAX = 2**31 - 1
PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def offsets_violation(cu_seqlens, cu_groups):
    """The argument the offsets rules blame first, or None for a valid layout."""
    for i, value in enumerate(cu_seqlens):
        if not -(2**31) <= value <= INT32_MAX:
            return f"cu_seqlens[{i}]"
    for g, value in enumerate(cu_groups):
        if not -(2**31) <= value <= INT32_MAX:
            return f"cu_groups[{g}]"
    if len(cu_seqlens) < 2:
        return "cu_seqlens"
    if cu_seqlens[0] != 0:
        return "cu_seqlens[0]"
    for i in range(1, len(cu_seqlens)):
        if cu_seqlens[i] <= cu_seqlens[i - 1]:  # every segment holds >= 1 token
            return f"cu_seqlens[{i}]"
    if len(cu_groups) < 2:
        return "cu_groups"
    if cu_groups[0] != 0:
        return "cu_groups[0]"
    if cu_groups[-1] != len(cu_seqlens) - 1:  # the groups cover every segment
        return f"cu_groups[{len(cu_groups) - 1}]"
    for g in range(1, len(cu_groups)):
        if cu_groups[g] < cu_groups[g - 1] + 2:  # a prompt and >= 1 response per group
            return f"cu_groups[{g}]"
    return None


def lengths_violation(prompt_lengths, response_lengths):
    """The argument the lengths rules blame first, or None for a valid layout. Every entry is
    converted (and so range-checked) before the structure is looked at."""
    for name, length in entries_of(prompt_lengths, response_lengths):
        if not -(2**31) <= length <= INT32_MAX:
            return name
    if not prompt_lengths:
        return "prompt_lengths"
    if len(response_lengths) != len(prompt_lengths):
        return "response_lengths"
    total = 0

    def breaks_a_rule(length):  # every segment non-empty, offsets int32
        nonlocal total
        total += length
        return length < 1 or total > INT32_MAX

    for g, (prompt, responses) in enumerate(zip(prompt_lengths, response_lengths)):
        if breaks_a_rule(prompt):
            return f"prompt_lengths[{g}]"
        if not responses:
            return f"response_lengths[{g}]"
        for i, response in enumerate(responses):
            if breaks_a_rule(response):
                return f"response_lengths[{g}][{i}]"
    return None


def entries_of(prompt_lengths, response_lengths):
    yield from ((f"prompt_lengths[{g}]", p) for g, p in enumerate(prompt_lengths))
    for g, responses in enumerate(response_lengths):
        yield from ((f"response_lengths[{g}][{i}]", r) for i, r in enumerate(responses))


def names(argument):
    return re.escape(argument) + r"[:']"


def check_against_rules(build, violation):
    try:
        layout = build()
    except ValueError as error:
        assert violation is not None, f"valid input refused: {error}"
        assert re.search(names(violation), str(error)), f"expected {violation} to be named: {error}"
        return None
    assert violation is None, f"{violation} breaks a rule but a Layout was built"
    return layout


lengths = st.integers(min_value=1, max_value=6)
groups = st.lists(st.tuples(lengths, st.lists(lengths, min_size=1, max_size=4)), min_size=1, max_size=4)


def offsets_of(batch):
    segment_lengths = [length for prompt, responses in batch for length in (prompt, *responses)]
    cu_seqlens = [0, *itertools.accumulate(segment_lengths)]
    cu_groups = [0, *itertools.accumulate(1 + len(responses) for _, responses in batch)]
    return cu_seqlens, cu_groups


@st.composite
def offsets(draw):
    """Valid offsets, then (most of the time) one entry changed, removed or added."""
    cu_seqlens, cu_groups = offsets_of(draw(groups))
    edit = draw(st.sampled_from(["none", "change", "remove", "insert"]))
    target = draw(st.sampled_from([cu_seqlens, cu_groups]))
    index = draw(st.integers(min_value=0, max_value=len(target)))
    value = draw(st.one_of(st.integers(-3, 30), st.sampled_from([INT32_MAX, 2**31, -(2**31) - 1, 2**40])))
    if edit == "change" and index < len(target):
        target[index] = value
    elif edit == "remove" and index < len(target):
        del target[index]
    elif edit == "insert":
        target.insert(index, value)
    return cu_seqlens, cu_groups


@PROPERTY_SETTINGS
@given(offsets())
def test_from_offsets_accepts_exactly_the_valid_offsets(case):
    cu_seqlens, cu_groups = case
    layout = check_against_rules(
        lambda: dualkv.Layout.from_offsets(cu_seqlens, cu_groups), offsets_violation(cu_seqlens, cu_groups)
    )
    if layout is not None:
        assert layout.cu_seqlens.tolist() == cu_seqlens and layout.cu_groups.tolist() == cu_groups


@PROPERTY_SETTINGS
@given(st.lists(st.integers(-40, 40), max_size=8), st.lists(st.integers(-3, 12), max_size=4))
def test_from_offsets_with_arbitrary_integers(cu_seqlens, cu_groups):
    check_against_rules(
        lambda: dualkv.Layout.from_offsets(cu_seqlens, cu_groups), offsets_violation(cu_seqlens, cu_groups)
    )


length_values = st.one_of(st.integers(-2, 6), st.sampled_from([INT32_MAX - 3, INT32_MAX, 2**31, 2**62]))


@PROPERTY_SETTINGS
@given(
    st.lists(length_values, max_size=4),
    st.lists(st.lists(length_values, max_size=3), max_size=5),
)
def test_from_lengths_accepts_exactly_the_valid_lengths(prompt_lengths, response_lengths):
    layout = check_against_rules(
        lambda: dualkv.Layout.from_lengths(prompt_lengths, response_lengths),
        lengths_violation(prompt_lengths, response_lengths),
    )
    if layout is not None:
        assert layout.prompt_lengths == prompt_lengths and layout.response_lengths == response_lengths


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(groups, st.sampled_from([(2, 1), (4, 2), (3, 3)]))
def test_attention_on_random_layouts_equals_the_dense_mask_reference(batch, heads):
    """Every valid layout, not only the hand-picked ones, computes the masked softmax."""
    num_heads, kv_heads = heads
    prompt_lengths = [prompt for prompt, _ in batch]
    response_lengths = [responses for _, responses in batch]
    layout = dualkv.Layout.from_lengths(prompt_lengths, response_lengths)
    generator = torch.Generator().manual_seed(layout.num_tokens)
    q, k, v = (torch.randn(layout.num_tokens, h, 8, generator=generator) for h in (num_heads, kv_heads, kv_heads))
    out, lse = dualkv.attention_with_lse(q, k, v, layout)
    mask = visibility_mask(prompt_lengths, response_lengths)
    expected_out, expected_lse = dense_reference(q.double(), k.double(), v.double(), mask, 8**-0.5)
    torch.testing.assert_close(out.double(), expected_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), expected_lse, rtol=1e-5, atol=1e-5)
