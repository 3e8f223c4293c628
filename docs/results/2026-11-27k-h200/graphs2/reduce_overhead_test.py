# The test that graphs2/ ran at the end of tests/python/test_op_cuda_graphs.py (removed after this
# run: torch.compile(mode="reduce-overhead") around the op fails, see graphs_py.txt).


def test_torch_compile_reduce_overhead_matches_eager(generator, capsys):
    """torch.compile(mode="reduce-overhead") around forward and backward: equal to eager calls on
    fresh inputs, call after call (its CUDA graph trees record on a later call than the first)."""
    layout = dualkv.Layout.from_lengths(PROMPTS, RESPONSES)
    step = Step(layout.num_tokens, torch.bfloat16, "auto", deterministic=True)

    def forward(q, k, v):
        return dualkv.attention(q, k, v, layout, deterministic=True)

    compiled = torch.compile(forward, mode="reduce-overhead")
    torch._dynamo.utils.counters.clear()
    for _ in range(4):
        step.fill(generator)
        step.q.grad = step.k.grad = step.v.grad = None
        out = compiled(step.q, step.k, step.v)
        out.backward(step.dout)
        actual = [out.detach().clone(), step.q.grad.clone(), step.k.grad.clone(), step.v.grad.clone()]
        expected = step.run(layout)
        for name, a, e in zip(("out", "dq", "dk", "dv"), actual, expected):
            assert torch.equal(a, e), name
    with capsys.disabled():
        print(f"\nreduce-overhead: cudagraph skips {dict(torch._dynamo.utils.counters['inductor'])}")
