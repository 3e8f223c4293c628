"""dualkv.pack / pack_rows and the maps between the N-copy rows and the packed batch."""

import dataclasses
import random

import pytest
import torch

import dualkv

PAD = 0


def _random_groups(seed, shapes):
    """shapes: list of (P, [R_0, ...]); token ids in 1..99 so PAD never appears in real tokens."""
    rng = random.Random(seed)
    prompts = [[rng.randint(1, 99) for _ in range(p)] for p, _ in shapes]
    responses = [[[rng.randint(1, 99) for _ in range(r)] for r in rs] for _, rs in shapes]
    return prompts, responses


SHAPES = [(5, [3, 1, 4]), (1, [2]), (3, [1, 1]), (4, [6, 2, 2, 5])]


def test_pack_layout_positions_and_tokens():
    prompts, responses = _random_groups(0, SHAPES)
    packed = dualkv.pack(prompts, responses)
    expected_tokens, expected_positions, cu_seqlens, cu_groups = [], [], [0], [0]
    for prompt, group in zip(prompts, responses):
        expected_tokens += prompt
        expected_positions += list(range(len(prompt)))
        cu_seqlens.append(cu_seqlens[-1] + len(prompt))
        for response in group:
            expected_tokens += response
            expected_positions += list(range(len(prompt), len(prompt) + len(response)))
            cu_seqlens.append(cu_seqlens[-1] + len(response))
        cu_groups.append(len(cu_seqlens) - 1)
    assert packed.input_ids.tolist() == [expected_tokens]
    assert packed.position_ids.tolist() == [expected_positions]
    assert packed.input_ids.dtype == packed.position_ids.dtype == torch.long
    assert packed.layout.cu_seqlens.tolist() == cu_seqlens
    assert packed.layout.cu_groups.tolist() == cu_groups
    assert packed.num_responses == sum(len(rs) for _, rs in SHAPES)
    assert packed.response_group.tolist() == [g for g, (_, rs) in enumerate(SHAPES) for _ in rs]


def test_score_rows_see_exactly_the_ncopy_context():
    # Scoring token j of response i must use a row whose visible context (its group's prompt plus
    # its own segment up to itself) is [prompt; response_i[:j]], as in the N-copy row.
    prompts, responses = _random_groups(1, SHAPES)
    packed = dualkv.pack(prompts, responses)
    tokens = packed.input_ids[0].tolist()
    segment_of_row, prompt_of_row, begin = [], [], 0
    for prompt, group in zip(prompts, responses):
        prompt_rows = list(range(begin, begin + len(prompt)))
        for length in [len(prompt)] + [len(r) for r in group]:
            for row in range(begin, begin + length):
                segment_of_row.append(range(begin, row + 1))
                prompt_of_row.append(prompt_rows)
            begin += length

    def context(row):
        own = list(segment_of_row[row])
        shared = [] if own[0] == prompt_of_row[row][0] else list(prompt_of_row[row])
        return [tokens[r] for r in shared + own]

    i = 0
    for prompt, group in zip(prompts, responses):
        for response in group:
            for j, token in enumerate(response):
                assert context(int(packed.score_rows[i, j])) == prompt + response[:j]
                assert tokens[int(packed.token_rows[i, j])] == token
            assert packed.response_mask[i].tolist() == [j < len(response) for j in range(packed.max_response_length)]
            i += 1


def _ncopy_rows(prompts, responses, padding, seed):
    """The N-copy batch a trainer holds: rows shuffled across groups, padded per `padding`."""
    rng = random.Random(seed)
    rows = [(g, prompt, response) for g, (prompt, group) in enumerate(zip(prompts, responses)) for response in group]
    rng.shuffle(rows)
    width = max(len(p) + len(r) for _, p, r in rows) + 3
    input_ids = torch.full((len(rows), width), PAD)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    response_mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for b, (_, prompt, response) in enumerate(rows):
        length = len(prompt) + len(response)
        start = {"right": 0, "left": width - length, "both": rng.randint(0, width - length)}[padding]
        input_ids[b, start : start + length] = torch.tensor(prompt + response)
        attention_mask[b, start : start + length] = 1
        response_mask[b, start + len(prompt) : start + length] = True
    group_ids = torch.tensor([10 * g + 3 for g, _, _ in rows])  # arbitrary, non-contiguous ids
    prompt_lengths = torch.tensor([len(p) for _, p, _ in rows])
    return input_ids, attention_mask, response_mask, group_ids, prompt_lengths, rows


@pytest.mark.parametrize("padding", ["right", "left", "both"])
def test_pack_rows_equals_pack_of_the_same_rollouts(padding):
    prompts, responses = _random_groups(2, SHAPES)
    input_ids, attention_mask, response_mask, group_ids, prompt_lengths, rows = _ncopy_rows(
        prompts, responses, padding, seed=4
    )
    packed, row_map = dualkv.pack_rows(input_ids, attention_mask, group_ids, response_mask=response_mask)
    # Groups in order of first appearance, responses in row order within a group.
    order = list(dict.fromkeys(g for g, _, _ in rows))
    expected = dualkv.pack([prompts[g] for g in order], [[r for h, _, r in rows if h == g] for g in order])
    for name in (
        "input_ids",
        "position_ids",
        "response_group",
        "response_lengths",
        "response_mask",
        "token_rows",
        "score_rows",
    ):
        assert torch.equal(getattr(packed, name), getattr(expected, name)), name
    assert torch.equal(packed.layout.cu_seqlens, expected.layout.cu_seqlens)
    assert torch.equal(packed.layout.cu_groups, expected.layout.cu_groups)

    by_lengths, map_by_lengths = dualkv.pack_rows(input_ids, attention_mask, group_ids, prompt_lengths=prompt_lengths)
    assert torch.equal(by_lengths.input_ids, packed.input_ids)
    for name in ("token_index", "response_index", "source_index"):
        assert torch.equal(getattr(map_by_lengths, name), getattr(row_map, name))


@pytest.mark.parametrize("padding", ["right", "left", "both"])
def test_round_trips_between_rows_and_packed(padding):
    prompts, responses = _random_groups(3, SHAPES)
    input_ids, attention_mask, response_mask, group_ids, _, _ = _ncopy_rows(prompts, responses, padding, seed=5)
    packed, row_map = dualkv.pack_rows(input_ids, attention_mask, group_ids, response_mask=response_mask)

    # Packed tokens -> rows rebuilds every real token; padding comes back as zeros.
    rebuilt = dualkv.unpack_tokens_to_rows(packed.input_ids, row_map)
    assert torch.equal(rebuilt, input_ids * attention_mask)
    assert torch.equal(
        dualkv.unpack_tokens_to_rows(packed.position_ids, row_map), (attention_mask.cumsum(1) - 1) * attention_mask
    )

    # Rows -> responses -> rows is the identity on response positions, zero elsewhere.
    row_values = torch.randn(*input_ids.shape, 2)
    responses_layout = dualkv.rows_to_responses(row_values, row_map)
    assert responses_layout.shape == (packed.num_responses, packed.max_response_length, 2)
    assert torch.equal(dualkv.unpack_to_rows(responses_layout, row_map), row_values * response_mask[..., None])
    # Responses -> rows -> responses is the identity on the response layout.
    values = torch.randn(packed.num_responses, packed.max_response_length) * packed.response_mask
    assert torch.equal(dualkv.rows_to_responses(dualkv.unpack_to_rows(values, row_map), row_map), values)
    # The response tokens themselves land where pack put them.
    assert torch.equal(
        dualkv.rows_to_responses(input_ids, row_map),
        torch.where(packed.response_mask, packed.input_ids[0][packed.token_rows], 0),
    )


def test_shared_prompt_gradient_is_the_sum_over_rows():
    prompts, responses = _random_groups(6, SHAPES)
    input_ids, attention_mask, response_mask, group_ids, _, rows = _ncopy_rows(prompts, responses, "left", seed=6)
    packed, row_map = dualkv.pack_rows(input_ids, attention_mask, group_ids, response_mask=response_mask)
    token_values = torch.zeros(packed.num_tokens, requires_grad=True)
    dualkv.unpack_tokens_to_rows(token_values, row_map).sum().backward()
    # Each prompt token is used by all N_g rows of its group, each response token by one row.
    expected = []
    for g in dict.fromkeys(g for g, _, _ in rows):
        expected += [float(len(responses[g]))] * len(prompts[g]) + [1.0] * sum(len(r) for r in responses[g])
    assert token_values.grad.tolist() == expected


def _valid_rows():
    prompts, responses = _random_groups(7, [(3, [2, 2]), (2, [1, 3])])
    return _ncopy_rows(prompts, responses, "right", seed=7)


def test_mismatched_prompt_in_a_group_names_row_and_group():
    input_ids, attention_mask, response_mask, group_ids, _, rows = _valid_rows()
    b = next(i for i, (g, _, _) in enumerate(rows) if i != [h for h, _, _ in rows].index(g))
    first = [h for h, _, _ in rows].index(rows[b][0])
    input_ids = input_ids.clone()
    input_ids[b, 0] = 100
    with pytest.raises(ValueError, match=rf"input_ids: row {b} of group {int(group_ids[b])} .* row {first}"):
        dualkv.pack_rows(input_ids, attention_mask, group_ids, response_mask=response_mask)


def test_prompts_of_different_lengths_in_a_group_are_rejected():
    input_ids, attention_mask, _, group_ids, prompt_lengths, rows = _valid_rows()
    b = [h for h, _, _ in rows].index(rows[0][0], 1)
    prompt_lengths = prompt_lengths.clone()
    prompt_lengths[b] -= 1
    with pytest.raises(ValueError, match=rf"input_ids: row {b} of group"):
        dualkv.pack_rows(input_ids, attention_mask, group_ids, prompt_lengths=prompt_lengths)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (
            lambda ids, am, rm, g, pl: (ids, am.index_fill(1, torch.tensor([1]), 0), rm, g, None),
            "attention_mask: row 0 has padding between",
        ),
        (lambda ids, am, rm, g, pl: (ids, am, rm & False, g, None), "response_mask: row 0 has no response token"),
        (lambda ids, am, rm, g, pl: (ids, am, rm | True, g, None), "response_mask: row 0 marks a padding position"),
        (lambda ids, am, rm, g, pl: (ids, am, None, g, pl * 0), "prompt_lengths: row 0 has an empty prompt"),
        (lambda ids, am, rm, g, pl: (ids, am, None, g, pl + 10), "prompt_lengths: row 0 leaves no response token"),
        (lambda ids, am, rm, g, pl: (ids, am, rm, g, pl), "response_mask, prompt_lengths: pass exactly one"),
        (lambda ids, am, rm, g, pl: (ids, am, rm, g[:-1], None), "group_ids: expected one integer per row"),
        (lambda ids, am, rm, g, pl: (ids, am[:, :-1], rm, g, None), "attention_mask: shape"),
        (lambda ids, am, rm, g, pl: (ids.float(), am, rm, g, None), "input_ids: expected integer"),
        (lambda ids, am, rm, g, pl: (ids, am * 0, rm, g, None), "attention_mask: row 0 has no real token"),
        (lambda ids, am, rm, g, pl: (ids.bool(), am, rm, g, None), "input_ids: expected integer"),
        (lambda ids, am, rm, g, pl: (ids - 1000, am, rm, g, None), "input_ids: token ids must be >= 0"),
    ],
)
def test_pack_rows_rejects_bad_rows_naming_the_argument(corrupt, message):
    input_ids, attention_mask, response_mask, group_ids, prompt_lengths, _ = _valid_rows()
    ids, am, rm, g, pl = corrupt(input_ids, attention_mask, response_mask, group_ids, prompt_lengths)
    with pytest.raises(ValueError, match=message):
        dualkv.pack_rows(ids, am, g, response_mask=rm, prompt_lengths=pl)


@pytest.mark.parametrize(
    "prompts, responses, message",
    [
        ([[1, 2]], [[[3]], [[4]]], "responses: expected one list of responses per prompt"),
        ([[1, 2]], [[]], r"responses\[0\]: expected a non-empty list"),
        ([[]], [[[3]]], r"prompts\[0\]: expected a non-empty 1-D sequence"),
        ([[1], [2]], [[[3]], [[4], []]], r"responses\[1\]\[1\]: expected a non-empty"),
        ([[1.5]], [[[3]]], r"prompts\[0\]: expected integer token ids"),
        ([], [], "prompts: at least one group"),
        ([[1, -2]], [[[3]]], r"prompts\[0\]: token ids must be >= 0, got -2"),
        ([[1]], [[[3], [True]]], r"responses\[0\]\[1\]: expected integer token ids"),
    ],
)
def test_pack_rejects_bad_rollouts_naming_the_argument(prompts, responses, message):
    with pytest.raises(ValueError, match=message):
        dualkv.pack(prompts, responses)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_unsigned_token_ids_beyond_uint8_are_refused_naming_the_argument(dtype):
    ids = torch.tensor([1, 2, 3]).to(getattr(torch, dtype))
    with pytest.raises(ValueError, match=rf"^prompts\[0\]: token ids of dtype torch.{dtype} are not supported"):
        dualkv.pack([ids], [[[4]]])
    rows = torch.tensor([[1, 2, 3, 4]]).to(getattr(torch, dtype))
    with pytest.raises(ValueError, match=rf"^input_ids: token ids of dtype torch.{dtype} are not supported"):
        dualkv.pack_rows(rows, torch.ones(1, 4), [0], prompt_lengths=[2])


@pytest.mark.parametrize("token", [2**63, 2**64, -(2**63) - 1])
def test_token_ids_beyond_int64_are_named(token):
    with pytest.raises(ValueError, match=rf"^responses\[0\]\[1\]\[2\]: token id {token} does not fit in int64"):
        dualkv.pack([[1, 2]], [[[3], [4, 5, token]]])


def test_prompts_and_responses_must_be_sequences_not_iterators():
    with pytest.raises(TypeError, match="^prompts: expected a list or tuple of token-id sequences, got generator"):
        dualkv.pack((p for p in [[1, 2]]), [[[3]]])
    with pytest.raises(TypeError, match="^responses: expected a list or tuple of lists of token-id sequences, got map"):
        dualkv.pack([[1, 2]], map(list, [[[3]]]))
    message = r"^responses\[0\]: expected a non-empty list of token-id sequences, got generator"
    with pytest.raises(ValueError, match=message):
        dualkv.pack([[1, 2]], [(r for r in [[3]])])


def test_meta_token_ids_are_named():
    with pytest.raises(ValueError, match=r"^prompts\[0\]: a tensor on the meta device holds no token ids"):
        dualkv.pack([torch.tensor([1, 2], device="meta")], [[[3]]])


def test_pack_names_token_lists_that_are_not_sequences():
    with pytest.raises(TypeError, match=r"^responses\[0\]\[0\]: expected a sequence of token ids, got str"):
        dualkv.pack([[1, 2]], [["ab"]])


def test_pack_rows_ignores_padding_ids():
    """Only real tokens are token ids; padding may hold anything (e.g. -100)."""
    input_ids = torch.tensor([[5, 6, 7, -100], [5, 6, 8, 9]])
    attention_mask = (input_ids >= 0).long()
    packed, _ = dualkv.pack_rows(input_ids, attention_mask, [0, 0], prompt_lengths=[2, 2])
    assert packed.input_ids.tolist() == [[5, 6, 7, 8, 9]]


def test_batches_packed_in_inference_mode_hold_ordinary_tensors():
    """A batch packed during rollouts (under torch.inference_mode) must serve the training step,
    where autograd saves its token ids."""
    input_ids, attention_mask, response_mask, group_ids, _, _ = _valid_rows()
    with torch.inference_mode():
        packed = dualkv.pack([[1, 2, 3]], [[[4, 5], [6]]])
        packed_rows, row_map = dualkv.pack_rows(input_ids, attention_mask, group_ids, response_mask=response_mask)
    tensors = [getattr(batch, f.name) for batch in (packed, packed_rows) for f in dataclasses.fields(batch)]
    tensors += [getattr(row_map, f.name) for f in dataclasses.fields(row_map)]
    assert not any(t.is_inference() for t in tensors if isinstance(t, torch.Tensor))
