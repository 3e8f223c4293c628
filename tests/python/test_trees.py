"""Tree layouts from Python: Layout.from_tree, the operator on trees against a dense mask built
from the definition, and pack_trajectories on a tiny Qwen3 against every trajectory run alone
(log-probs within 1e-5, the GRPO loss and every parameter's gradient within 1e-4 relative; fp32).
"""


import pytest
import torch
from models_support import grpo_loss, model_pair
from trees_support import agentic_trajectories, flat

import dualkv
import dualkv.transformers  # noqa: F401  (registers attn_implementation="dualkv")
from dualkv import Turn

# Segments in packed order: a root with a branch of two leaves and a leaf of its own, packed
# depth-first, then a second tree.
PARENTS = [-1, 0, 1, 1, 0, -1, 5]
LENGTHS = [5, 3, 2, 4, 1, 3, 2]


def dense_tree_mask(parents, lengths):
    """(T, T) bool: query q sees key k iff k <= q and k's segment is q's or an ancestor of it."""
    segment = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    ancestors = torch.eye(len(lengths), dtype=torch.bool)
    for s, parent in enumerate(parents):
        if parent >= 0:
            ancestors[s] |= ancestors[parent]
    tokens = segment.numel()
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    return causal & ancestors[segment][:, segment]


def test_from_tree_positions_continue_along_the_path():
    layout = dualkv.Layout.from_tree(PARENTS, LENGTHS)
    assert layout.num_segments == 7 and layout.num_tokens == sum(LENGTHS) and layout.depth == 3
    assert layout.parents.tolist() == PARENTS and layout.segment_lengths == LENGTHS
    assert not layout.is_two_level
    expected = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 5, 0, 1, 2, 3, 4]
    assert layout.position_ids.tolist() == expected
    assert layout.segment_ids.tolist() == torch.repeat_interleave(torch.arange(7), torch.tensor(LENGTHS)).tolist()


def test_a_two_level_tree_is_the_group_layout():
    tree = dualkv.Layout.from_tree([-1, 0, 0, -1, 3], [4, 2, 3, 1, 5])
    groups = dualkv.Layout.from_lengths([4, 1], [[2, 3], [5]])
    assert tree.is_two_level and tree.depth == 2
    assert torch.equal(tree.cu_groups, groups.cu_groups) and torch.equal(tree.parents, groups.parents)
    assert tree.prompt_lengths == [4, 1] and tree.response_lengths == [[2, 3], [5]]
    assert torch.equal(tree.position_ids, groups.position_ids)


@pytest.mark.parametrize("attribute", ["cu_groups", "num_groups", "prompt_lengths", "response_lengths", "group_ids"])
def test_trees_have_no_groups(attribute):
    with pytest.raises(ValueError, match="^layout: a tree of depth 3 that is not two-level"):
        getattr(dualkv.Layout.from_tree(PARENTS, LENGTHS), attribute)


@pytest.mark.parametrize(
    "parents, lengths, message",
    [
        ([-1, 2, 0], [1, 1, 1], r"'parents\[1\]': must be < 1"),
        ([-1, 2, 1], [1, 1, 1], r"'parents\[1\]': segments 1 -> 2 -> 1 form a cycle"),
        ([-1, -3], [1, 1], r"'parents\[1\]': must be -1 \(a root\) or the index"),
        ([-1, 0], [1, 0], r"'lengths\[1\]': must be >= 1"),
        ([-1, 0], [2**31 - 2, 2], r"'lengths\[1\]': brings the total to 2147483648"),
        ([-1], [1, 1], r"'parents': must have one entry per segment"),
        ([], [], "'lengths': must not be empty"),
        ([-1, 2**70], [1, 1], r"parents\[1\]: must be -1 \(a root\) or the index of an earlier segment, got"),
    ],
)
def test_from_tree_errors_name_the_argument_and_rule(parents, lengths, message):
    with pytest.raises(ValueError, match=message):
        dualkv.Layout.from_tree(parents, lengths)


def test_from_tree_refuses_non_integers():
    with pytest.raises(TypeError, match=r"parents\[1\]: expected an int, got float"):
        dualkv.Layout.from_tree([-1, 0.0], [1, 1])
    with pytest.raises(TypeError, match=r"lengths\[0\]: expected an int, got bool"):
        dualkv.Layout.from_tree([-1], [True])


def test_layouts_pickle_and_move_with_their_tree():
    import pickle

    layout = dualkv.Layout.from_tree(PARENTS, LENGTHS)
    copy = pickle.loads(pickle.dumps(layout))
    assert torch.equal(copy.parents, layout.parents) and torch.equal(copy.position_ids, layout.position_ids)
    assert torch.equal(layout.to("meta").parents, layout.parents)


def _reference_attention(q, k, v, mask):
    scores = torch.einsum("thd,shd->hts", q, k.repeat_interleave(q.shape[1] // k.shape[1], dim=1))
    scores = scores / q.shape[-1] ** 0.5
    probabilities = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.einsum("hts,shd->thd", probabilities, v.repeat_interleave(q.shape[1] // k.shape[1], dim=1))


def _devices_and_families():
    cases = [("cpu", "auto")]
    if torch.cuda.is_available() and dualkv.cuda_compiled:
        cases += [("cuda", "portable")]
        if torch.cuda.get_device_capability()[0] == 9:
            cases += [("cuda", "hopper")]
    return cases


@pytest.mark.parametrize("device, family", _devices_and_families())
@pytest.mark.parametrize("deterministic", [False, True])
def test_attention_on_a_tree_equals_the_dense_mask(device, family, deterministic):
    gen = torch.Generator().manual_seed(5)
    parents = [-1, 0, 1, 1, 0, 4, -1, 6, 6, 0]
    lengths = [70, 1, 65, 3, 17, 129, 2, 40, 1, 30]
    tokens = sum(lengths)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    q, k, v, dout = (
        torch.randn(tokens, heads, 64, generator=gen).to(device, dtype) for heads in (4, 2, 2, 4)
    )
    mask = dense_tree_mask(parents, lengths).to(device)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    expected = _reference_attention(*leaves, mask)
    expected.backward(dout.double())
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    layout = dualkv.Layout.from_tree(parents, lengths)
    out = dualkv.attention(*inputs, layout, deterministic=deterministic, kernel_family=family)
    out.backward(dout)
    tolerance = 2e-5 if dtype == torch.float32 else 3e-2
    for got, want in zip([out, *(t.grad for t in inputs)], [expected, *(t.grad for t in leaves)]):
        error = (got.double() - want).norm() / want.norm()
        assert error <= tolerance, float(error)


# --- pack_trajectories ------------------------------------------------------------------------


def test_pack_trajectories_stores_every_common_prefix_once():
    trajectories = agentic_trajectories(0)
    batch = dualkv.pack_trajectories(trajectories)
    flats = [flat(t) for t in trajectories]
    # Every distinct prefix once: the packed tokens are the trie's.
    prefixes = {tuple(tokens[: j + 1]) for tokens, _ in flats for j in range(len(tokens))}
    assert batch.num_tokens == len(prefixes)
    assert batch.layout.depth == 3  # shared turns, then the branches, then the mid-turn split
    assert batch.response_group.tolist() == [0, 0, 0, 0, 1, 1]
    ids = batch.input_ids[0]
    for i, (tokens, trained) in enumerate(flats):
        count = sum(trained)
        assert int(batch.response_lengths[i]) == count
        rows = batch.token_rows[i, :count]
        # The trained tokens in order, each predicted by the token before it on its own path.
        assert ids[rows].tolist() == [t for t, flag in zip(tokens, trained) if flag]
        before = [tokens[j - 1] for j, flag in enumerate(trained) if flag]
        assert ids[batch.score_rows[i, :count]].tolist() == before
        assert batch.position_ids[0, rows].tolist() == [j for j, flag in enumerate(trained) if flag]
        assert not batch.response_mask[i, count:].any()


def test_pack_trajectories_packs_depth_first_with_positions_along_the_path():
    batch = dualkv.pack_trajectories(agentic_trajectories(1))
    parents = batch.layout.parents.tolist()
    # Depth-first: every subtree is contiguous, so a segment's descendants follow it directly.
    for s, parent in enumerate(parents):
        assert parent < s
        if parent >= 0:
            assert all(p >= parent for p in parents[parent + 1 : s + 1])
    assert torch.equal(batch.position_ids[0], batch.layout.position_ids)


def test_pack_trajectories_group_ids_and_errors():
    trajectories = agentic_trajectories(2)
    batch = dualkv.pack_trajectories(trajectories, group_ids=[3, 3, 4, 4, 5, 5])
    assert batch.response_group.tolist() == [3, 3, 4, 4, 5, 5]
    with pytest.raises(ValueError, match="group_ids: expected one integer per trajectory"):
        dualkv.pack_trajectories(trajectories, group_ids=[1, 2])
    with pytest.raises(ValueError, match=r"trajectories\[0\]: its first token is trained"):
        dualkv.pack_trajectories([[Turn([1, 2], True)]])
    with pytest.raises(ValueError, match="trajectories: no turn is trained"):
        dualkv.pack_trajectories([[Turn([1, 2], False)]])
    with pytest.raises(TypeError, match=r"trajectories\[0\]\[1\].trained: expected a bool"):
        dualkv.pack_trajectories([[Turn([1, 2], False), Turn([3], 1)]])
    with pytest.raises(ValueError, match=r"trajectories\[0\]\[0\].token_ids: token ids must be >= 0"):
        dualkv.pack_trajectories([[Turn([-1, 2], False), Turn([3], True)]])
    with pytest.raises(ValueError, match=r"trajectories\[1\]: expected a non-empty list of turns"):
        dualkv.pack_trajectories([[Turn([1], False), Turn([3], True)], []])
    with pytest.raises(ValueError, match=r"trajectories\[0\]\[0\].token_ids: expected a non-empty 1-D"):
        dualkv.pack_trajectories([[Turn([], False), Turn([3], True)]])


def _per_trajectory_logprobs(model, trajectories):
    """Every trajectory run alone through the model (no dualkv): log-probs of its trained tokens."""
    rows = []
    for trajectory in trajectories:
        tokens, trained = flat(trajectory)
        logits = model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0]
        log_p = torch.log_softmax(logits.float(), dim=-1)
        rows.append(torch.stack([log_p[j - 1, tokens[j]] for j, flag in enumerate(trained) if flag]))
    out = torch.zeros(len(rows), max(r.numel() for r in rows))
    for i, r in enumerate(rows):
        out = out.index_put((torch.full((r.numel(),), i), torch.arange(r.numel())), r)
    return out


# qwen3_5: Gated DeltaNet layers on a tree, each segment starting from its parent's final state and
# convolution tail (reaching into earlier ancestors where the parent is shorter than the kernel).
@pytest.mark.parametrize("name", ["qwen3", "qwen3_5"])
@pytest.mark.parametrize("aggregation_seed", [3, 4])
def test_tiny_model_on_packed_trajectories_equals_each_trajectory_alone(name, aggregation_seed):
    packed_model, reference_model = model_pair(name, "eager")
    trajectories = agentic_trajectories(aggregation_seed)
    batch = dualkv.pack_trajectories(trajectories)
    assert batch.num_tokens < sum(len(flat(t)[0]) for t in trajectories)

    reference_logprobs = _per_trajectory_logprobs(reference_model, trajectories)
    reference_loss = grpo_loss(reference_logprobs, batch, seed=aggregation_seed)
    reference_loss.backward()

    logits = packed_model(
        input_ids=batch.input_ids, position_ids=batch.position_ids, dualkv_layout=batch.layout, use_cache=False
    ).logits
    logprobs = dualkv.response_logprobs(logits, batch)
    loss = grpo_loss(logprobs, batch, seed=aggregation_seed)
    loss.backward()

    torch.testing.assert_close(logprobs, reference_logprobs, rtol=0, atol=1e-5)
    torch.testing.assert_close(loss, reference_loss, rtol=1e-4, atol=1e-7)
    for (name, p), (_, r) in zip(packed_model.named_parameters(), reference_model.named_parameters()):
        error = (p.grad - r.grad).norm() / r.grad.norm().clamp(min=1e-30)
        assert error <= 1e-4, f"{name}: relative gradient error {float(error):.2e}"
