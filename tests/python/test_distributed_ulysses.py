"""Ulysses sequence parallelism (dualkv.distributed.ulysses_attention) on 2 and 4 gloo processes
against the single-process op: forward, dq, dk, dv, pad rows, every K/V head-sharing regime; and
with a custom attention_fn between the exchanges against that function on the whole stream. The
same cases on 2 and 4 GPUs over NCCL, in bf16 through the CUDA kernels, where GPUs are present."""

import itertools

import pytest
import torch
from distributed_support import run_ranks

import dualkv
from dualkv.distributed import kv_replication, ulysses_attention

# Two groups, ragged responses, T = 21: never a multiple of 2 or 4, so the last rank holds pad rows.
LAYOUT_LENGTHS = ([5, 3], [[3, 1, 4], [2, 3]])
HEAD_DIM = 8

# (H, Hk) per group size W, covering W dividing Hk, W below Hk without dividing it, W equal to Hk,
# and W above Hk (a multiple of it or not).
CASES = {
    2: [(8, 4), (12, 3), (8, 2), (4, 1)],
    4: [(16, 8), (12, 6), (8, 4), (12, 3), (8, 2)],
}


def test_kv_replication_gives_every_rank_exactly_the_kv_heads_it_reads():
    for heads in range(1, 65):
        for kv_heads, world in itertools.product(_divisors(heads), _divisors(heads)):
            _check_replication(heads, kv_heads, world)


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_replication(heads, kv_heads, world):
    replicas = kv_replication(heads, kv_heads, world)
    expanded = kv_heads * replicas
    assert expanded % world == 0
    per_rank_q, per_rank_kv = heads // world, expanded // world
    for rank, j in itertools.product(range(world), range(per_rank_q)):
        h = rank * per_rank_q + j
        local_kv = j // (per_rank_q // per_rank_kv)  # the op's GQA rule on the rank's heads
        assert (rank * per_rank_kv + local_kv) // replicas == h // (heads // kv_heads), (heads, kv_heads, world)
    if kv_heads % world == 0:
        assert replicas == 1, (heads, kv_heads, world)


def _dualkv_attention(q, k, v, layout, scale):
    return dualkv.attention(q, k, v, layout, softmax_scale=scale)


class _Setting:
    """Where a case runs: the CPU processes in fp32 (assert_close's default tolerances), or each rank's GPU
    in bf16."""

    def __init__(self, lengths, head_dim, device=None, dtype=torch.float32, tolerance=None):
        self.lengths, self.head_dim, self.device, self.dtype = lengths, head_dim, device, dtype
        self.tolerance = tolerance or {}

    def randn(self, gen, *shape):
        return torch.randn(*shape, generator=gen).to(self.device, self.dtype)


CPU = _Setting(LAYOUT_LENGTHS, HEAD_DIM)


def _reference(setting, heads, kv_heads, seed, scale, attention_fn):
    gen = torch.Generator().manual_seed(seed)
    layout = dualkv.Layout.from_lengths(*setting.lengths)
    tokens = layout.num_tokens
    q = setting.randn(gen, tokens, heads, setting.head_dim).requires_grad_()
    k = setting.randn(gen, tokens, kv_heads, setting.head_dim).requires_grad_()
    v = setting.randn(gen, tokens, kv_heads, setting.head_dim).requires_grad_()
    dout = setting.randn(gen, tokens, heads, setting.head_dim)
    out = attention_fn(q, k, v, layout, scale)
    out.backward(dout)
    return layout, (q, k, v), dout, out.detach(), (q.grad, k.grad, v.grad)


def _shard(full, rank, rows, gen):
    """This rank's rows of `full`, the stream padded at its end with random (ignored) rows."""
    padded = torch.cat([full.detach(), torch.randn(rows * 8, *full.shape[1:], generator=gen).to(full)])
    return padded[rank * rows : (rank + 1) * rows].clone()


def _zero_padded_rows(full, rank, rows):
    padded = torch.cat([full, full.new_zeros(rows * 8, *full.shape[1:])])
    return padded[rank * rows : (rank + 1) * rows]


def _check_case(rank, world, heads, kv_heads, extra_rows, scale, attention_fn=None, setting=CPU):
    """ulysses_attention on this rank's shard against `attention_fn` (None: dualkv's op) on the whole
    stream in this process."""
    seed = heads * 100 + kv_heads
    layout, inputs, dout, ref_out, ref_grads = _reference(
        setting, heads, kv_heads, seed, scale, attention_fn=attention_fn or _dualkv_attention
    )
    rows = -(-layout.num_tokens // world) + extra_rows
    gen = torch.Generator().manual_seed(rank)
    q, k, v = (_shard(x, rank, rows, gen).requires_grad_() for x in inputs)
    out = ulysses_attention(q, k, v, layout, None, softmax_scale=scale, attention_fn=attention_fn)
    out.backward(_shard(dout, rank, rows, gen))
    what = f"rank {rank}/{world}, H={heads}, Hk={kv_heads}, rows={rows}, attention_fn={attention_fn}"
    close = setting.tolerance
    torch.testing.assert_close(out, _zero_padded_rows(ref_out, rank, rows), **close, msg=lambda m: f"out, {what}: {m}")
    for name, got, expected in zip("qkv", (q.grad, k.grad, v.grad), ref_grads):
        torch.testing.assert_close(
            got, _zero_padded_rows(expected, rank, rows), **close, msg=lambda m, n=name: f"d{n}, {what}: {m}"
        )


def _body(rank, world, setting=CPU):
    for case, (heads, kv_heads) in enumerate(CASES[world]):
        # One case per W adds a whole pad block at the end (a bucket-padded stream) and a custom scale.
        scale = 0.3 if case == 0 else None
        _check_case(rank, world, heads, kv_heads, extra_rows=int(case == 0), scale=scale, setting=setting)
    if world == 2 and setting is CPU:
        _check_errors()


def _check_errors():
    layout = dualkv.Layout.from_lengths(*LAYOUT_LENGTHS)
    rows = -(-layout.num_tokens // 2)
    q, kv = torch.zeros(rows, 4, 8), torch.zeros(rows, 2, 8)
    with pytest.raises(ValueError, match=r"deterministic: selects dualkv's deterministic backward, so it cannot be "
                                         r"combined with a custom attention_fn"):
        ulysses_attention(q, kv, kv, layout, None, deterministic=True, attention_fn=_causal_stream_attention)
    with pytest.raises(TypeError, match=r"attention_fn: expected a callable or None, got str"):
        ulysses_attention(q, kv, kv, layout, None, attention_fn="flash")
    wrong_shape = r"attention_fn: must return q's shape \(21, 2, 8\) \(T, H/W, d\), got \(21, 1, 8\)"
    with pytest.raises(ValueError, match=wrong_shape):
        ulysses_attention(q, kv, kv, layout, None, attention_fn=lambda q, k, v, layout, scale: q[:, :1])
    with pytest.raises(ValueError, match=r"group: its size W = 2 must divide the query heads H = 3"):
        ulysses_attention(torch.zeros(rows, 3, 8), torch.zeros(rows, 1, 8), torch.zeros(rows, 1, 8), layout, None)
    with pytest.raises(ValueError, match=r"q: W \* T_local = 2 \* 10 rows cannot hold the layout's 21 tokens"):
        ulysses_attention(torch.zeros(10, 4, 8), torch.zeros(10, 2, 8), torch.zeros(10, 2, 8), layout, None)
    with pytest.raises(ValueError, match=r"k: kv heads Hk = 3 must divide the query heads H = 4"):
        ulysses_attention(torch.zeros(rows, 4, 8), torch.zeros(rows, 3, 8), torch.zeros(rows, 3, 8), layout, None)


@pytest.mark.parametrize("world", sorted(CASES))
def test_ulysses_attention_equals_single_process_op(world, tmp_path):
    run_ranks(world, tmp_path, _body)


def _gpu_setting():
    # Awkward lengths (prompts of 130 and 17 rows; responses of 129, 1, 64, 127 and 3) so that the
    # kernels' boundary tiles and the shards' boundaries fall inside segments; head_dim 64, bf16.
    # Each case sums replicated K/V heads' gradients in bf16 (one more rounding than the
    # single-process op's in-kernel sum): tolerances of a few bf16 steps of the values' O(1) scale.
    lengths = ([130, 17], [[129, 1, 64], [127, 3]])
    return _Setting(lengths, 64, torch.device("cuda", torch.cuda.current_device()), torch.bfloat16,
                    dict(rtol=2e-2, atol=2e-2))


def _gpu_body(rank, world):
    _body(rank, world, _gpu_setting())


@pytest.mark.parametrize("world", sorted(CASES))
def test_ulysses_attention_on_gpus_over_nccl_equals_single_gpu_op(world, tmp_path):
    if torch.cuda.device_count() < world or not dualkv.cuda_compiled():
        pytest.skip(f"needs {world} GPUs and dualkv's CUDA kernels")
    run_ranks(world, tmp_path, _gpu_body, backend="nccl")


def _causal_stream_attention(q, k, v, layout, scale):
    """An attention unlike dualkv's (causal over the whole stream, the layout's groups ignored), so a
    ulysses_attention that ran its default op instead would fail the comparison."""
    assert q.shape[0] == layout.num_tokens, "attention_fn gets the whole stream, no pad rows"
    heads_major = (x.transpose(0, 1) for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(*heads_major, is_causal=True, scale=scale, enable_gqa=True)
    return out.transpose(0, 1)


def _custom_attention_body(rank, world):
    # W = 2 dividing Hk, not dividing it (Hk = 3) and above it (Hk = 1): the last two replicate K/V.
    for heads, kv_heads in [(8, 4), (12, 3), (4, 1)]:
        heads_seen = []  # (query heads, kv heads) of each call: the reference's, then this rank's

        def recorded(q, k, v, layout, scale):
            heads_seen.append((q.shape[1], k.shape[1]))
            return _causal_stream_attention(q, k, v, layout, scale)

        _check_case(rank, world, heads, kv_heads, extra_rows=1, scale=0.3, attention_fn=recorded)
        expanded_kv_heads = kv_heads * kv_replication(heads, kv_heads, world)
        assert heads_seen == [(heads, kv_heads), (heads // world, expanded_kv_heads // world)]


def test_ulysses_attention_runs_a_custom_attention_fn_between_the_exchanges(tmp_path):
    run_ranks(2, tmp_path, _custom_attention_body)
