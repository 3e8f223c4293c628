"""dualkv.distributed's recurrent pieces at sequence parallelism 2 and 4 (gloo) against the
unsharded computation: outputs and gradients of each rank's rows, and the convolution weight's
gradient summed over ranks. 3 heads and 6 channels: padded to a multiple of W = 2 and 4."""

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from distributed_support import run_ranks

import dualkv
from dualkv.distributed import ulysses_causal_conv1d, ulysses_gated_delta_rule
from dualkv.recurrent import RecurrentPlan, causal_conv1d, gated_delta_rule

# T = 27: rank boundaries fall inside prompts and responses at W = 2 and 4 (pad rows at both).
PROMPTS, RESPONSES = [5, 1, 9], [[3, 1, 4], [2, 1], [1, 1]]
HEADS, KEY_DIM, VALUE_DIM, CHANNELS, WIDTH = 3, 4, 5, 6, 4


def _inputs(tokens):
    generator = torch.Generator().manual_seed(0)
    q, k = (torch.randn(tokens, HEADS, KEY_DIM, generator=generator) for _ in range(2))
    v = torch.randn(tokens, HEADS, VALUE_DIM, generator=generator)
    g = F.logsigmoid(torch.randn(tokens, HEADS, generator=generator))
    beta = torch.rand(tokens, HEADS, generator=generator)
    x = torch.randn(CHANNELS, tokens, generator=generator)
    weight = torch.randn(CHANNELS, WIDTH, generator=generator)
    bias = torch.randn(CHANNELS, generator=generator)
    out_grad = torch.randn(tokens, HEADS, VALUE_DIM, generator=generator)
    conv_grad = torch.randn(CHANNELS, tokens, generator=generator)
    return [q, k, v, g, beta], (x, weight, bias), out_grad, conv_grad


def _body(rank, world):
    plan = RecurrentPlan.from_layout(dualkv.Layout.from_lengths(PROMPTS, RESPONSES))
    tokens = plan.num_tokens
    rule_in, (x, weight, bias), out_grad, conv_grad = _inputs(tokens)
    local = -(-tokens // world)
    rows = slice(rank * local, min((rank + 1) * local, tokens))
    real = rows.stop - rows.start

    def shard(t, dim=0):
        padded = F.pad(t.movedim(dim, -1), (0, world * local - tokens)).movedim(-1, dim)
        return padded.narrow(dim, rank * local, local).detach().clone().requires_grad_()

    # The recurrence: this rank's rows of output and input gradients equal the unsharded ones.
    full = [t.clone().requires_grad_() for t in rule_in]
    expected = gated_delta_rule(*full, plan)
    expected.backward(out_grad)
    local_in = [shard(t) for t in rule_in]
    got = ulysses_gated_delta_rule(*local_in, plan, None)
    got.backward(shard(out_grad))
    torch.testing.assert_close(got[:real], expected[rows], rtol=1e-6, atol=1e-6)
    assert not got[real:].any()
    for name, leaf, reference in zip(("q", "k", "v", "g", "beta"), local_in, full):
        torch.testing.assert_close(leaf.grad[:real], reference.grad[rows], rtol=1e-5, atol=1e-6, msg=name)

    # The convolution: rows as above; the weight's and bias's gradients are this rank's channel
    # block, and sum over the ranks to the unsharded ones.
    full_conv = [t.clone().requires_grad_() for t in (x, weight, bias)]
    expected = causal_conv1d(full_conv[0], full_conv[1], plan, bias=full_conv[2], activation=F.silu)
    expected.backward(conv_grad)
    local_x = shard(x, dim=1)
    local_weight, local_bias = weight.clone().requires_grad_(), bias.clone().requires_grad_()
    got = ulysses_causal_conv1d(local_x, local_weight, plan, None, bias=local_bias, activation=F.silu)
    got.backward(shard(conv_grad, dim=1))
    torch.testing.assert_close(got[:, :real], expected[:, rows], rtol=1e-6, atol=1e-6)
    assert not got[:, real:].any()
    torch.testing.assert_close(local_x.grad[:, :real], full_conv[0].grad[:, rows], rtol=1e-6, atol=1e-6)
    for leaf, reference in ((local_weight, full_conv[1]), (local_bias, full_conv[2])):
        summed = leaf.grad.clone()
        dist.all_reduce(summed)
        torch.testing.assert_close(summed, reference.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("world", [2, 4])
def test_sequence_parallel_recurrent_layers_equal_unsharded(tmp_path, world):
    run_ranks(world, tmp_path, _body)
