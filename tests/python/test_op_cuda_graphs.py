"""dualkv.attention under CUDA graph capture (torch.cuda.graph): forward and backward captured
after one eager call with the layout, replayed on new inputs, give what eager calls give; the graph
keeps working after its Python Layout is gone; a layout's first call cannot be captured."""

import gc

import pytest
import torch

import dualkv

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")

HEADS, KV_HEADS, HEAD_DIM = 8, 2, 128
PROMPTS, RESPONSES = [130, 17], [[70, 1, 129], [64]]
OTHER_PROMPTS, OTHER_RESPONSES = [200, 1], [[100, 30], [80]]  # as many tokens, other segments
# As many tokens, groups and segments as PROMPTS, RESPONSES: the same tensor shapes everywhere.
SAME_SHAPES_PROMPTS, SAME_SHAPES_RESPONSES = [100, 47], [[100, 30, 70], [64]]


def families():
    hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
    return ["portable"] + (["hopper"] if hopper else [])


class Step:
    """Static CUDA inputs (q, k, v leaves, dout) and one forward + backward of dualkv.attention."""

    def __init__(self, tokens, dtype, family, deterministic):
        self.q = torch.zeros(tokens, HEADS, HEAD_DIM, device="cuda", dtype=dtype, requires_grad=True)
        self.k = torch.zeros(tokens, KV_HEADS, HEAD_DIM, device="cuda", dtype=dtype, requires_grad=True)
        self.v = torch.zeros(tokens, KV_HEADS, HEAD_DIM, device="cuda", dtype=dtype, requires_grad=True)
        self.dout = torch.zeros(tokens, HEADS, HEAD_DIM, device="cuda", dtype=dtype)
        self.family, self.deterministic = family, deterministic

    def fill(self, generator):
        with torch.no_grad():
            for tensor in (self.q, self.k, self.v, self.dout):
                tensor.copy_(torch.randn(tensor.shape, generator=generator).to(tensor.dtype))

    def run(self, layout):
        """out (detached: a kept output must not keep the autograd graph alive) and the gradients,
        as new tensors (the leaves' .grad are reset first)."""
        self.q.grad = self.k.grad = self.v.grad = None
        out = dualkv.attention(
            self.q, self.k, self.v, layout, deterministic=self.deterministic, kernel_family=self.family
        )
        out.backward(self.dout)
        return out.detach(), self.q.grad, self.k.grad, self.v.grad

    def capture(self, layout):
        """A graph of `run(layout)` and its static outputs, captured after a warm-up call on a side
        stream (as torch.cuda.graph's documentation asks)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.run(layout)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.run(layout)
        return graph, outputs


def expect_replay_equals_eager(step, graph, static, layout, generator):
    """Fresh inputs into the static tensors, the graph replayed, then the same call run eagerly."""
    for _ in range(2):
        step.fill(generator)
        for tensor in static:
            tensor.fill_(float("nan"))
        graph.replay()
        replayed = [tensor.clone() for tensor in static]
        eager = step.run(layout)
        names = ("out", "dq", "dk", "dv")
        for name, actual, expected in zip(names, replayed, eager):
            assert not actual.isnan().any(), name
            if step.deterministic or name != "dq":
                assert torch.equal(actual, expected), name
            else:  # dQ's fp32 accumulation order varies between runs
                torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("family", families())
def test_a_captured_step_replays_like_eager_calls(family, dtype, deterministic, generator):
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    step = Step(layout.num_tokens, dtype, family, deterministic)
    step.fill(generator)
    graph, static = step.capture(layout)
    expect_replay_equals_eager(step, graph, static, layout, generator)


@pytest.mark.parametrize("family", families())
def test_a_graph_outlives_its_layout(family, generator):
    """The captured calls' device plans stay after the Python Layout is gone and other layouts
    have allocated and freed plans since."""
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    step = Step(layout.num_tokens, torch.bfloat16, family, deterministic=True)
    step.fill(generator)
    graph, static = step.capture(layout)
    del layout
    gc.collect()
    for _ in range(3):
        step.run(dualkv.Layout.from_lengths(OTHER_PROMPTS, OTHER_RESPONSES))
        torch.cuda.synchronize()
        gc.collect()
    expect_replay_equals_eager(step, graph, static, dualkv.Layout.from_lengths(PROMPTS, RESPONSES), generator)


@pytest.mark.parametrize("family", families())
def test_a_layout_freed_during_a_capture_leaves_it_valid(family, generator):
    """A layout whose tensors are gone frees its plans at the next call, here a captured one."""
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    step = Step(layout.num_tokens, torch.float16, family, deterministic=True)
    step.fill(generator)
    step.run(dualkv.Layout.from_lengths(OTHER_PROMPTS, OTHER_RESPONSES))
    torch.cuda.synchronize()
    gc.collect()
    graph, static = step.capture(layout)
    expect_replay_equals_eager(step, graph, static, layout, generator)


@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # the refused call captured nothing
def test_a_layouts_first_call_cannot_be_captured(generator):
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    step = Step(layout.num_tokens, torch.bfloat16, "auto", deterministic=False)
    step.fill(generator)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="options.stream.*run one call with this layout"):
        with torch.cuda.graph(graph):
            step.run(layout)
    graph, static = step.capture(layout)
    expect_replay_equals_eager(step, graph, static, layout, generator)


def test_torch_compile_reduce_overhead_runs_each_layouts_own_work(generator):
    """torch.compile(mode="reduce-overhead") around forward and backward, alternating two layouts
    whose offset tensors have the same shapes: every call equals the eager call with its own layout
    (a CUDA graph recorded for one would replay its work for the other; the operators are tagged
    cudagraph_unsafe, so Inductor runs them outside its graphs)."""
    layouts = [
        dualkv.Layout.from_lengths(PROMPTS, RESPONSES),
        dualkv.Layout.from_lengths(SAME_SHAPES_PROMPTS, SAME_SHAPES_RESPONSES),
    ]
    assert layouts[0].num_tokens == layouts[1].num_tokens
    step = Step(layouts[0].num_tokens, torch.bfloat16, "auto", deterministic=True)

    def forward(q, k, v, layout):
        return dualkv.attention(q, k, v, layout, deterministic=True)

    compiled = torch.compile(forward, mode="reduce-overhead")
    for call in range(6):
        layout = layouts[call % 2]
        step.fill(generator)
        step.q.grad = step.k.grad = step.v.grad = None
        out = compiled(step.q, step.k, step.v, layout)
        out.backward(step.dout)
        actual = [out.detach().clone(), step.q.grad.clone(), step.k.grad.clone(), step.v.grad.clone()]
        expected = step.run(layout)
        for name, a, e in zip(("out", "dq", "dk", "dv"), actual, expected):
            assert torch.equal(a, e), f"call {call}: {name}"
