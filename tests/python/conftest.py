"""Shared fixtures of the Python suite."""

import pytest
import torch


@pytest.fixture
def generator() -> torch.Generator:
    """A CPU generator with a fixed seed, so each test draws the same inputs on every run."""
    return torch.Generator().manual_seed(20260)


@pytest.fixture
def make_qkv(generator):
    """make_qkv(tokens, heads, kv_heads, head_dim, dtype) -> (q, k, v), standard normal values,
    rounded to `dtype`, leaf tensors that require grad."""

    def make(tokens, heads, kv_heads, head_dim, dtype=torch.float32):
        def draw(num_heads):
            values = torch.randn(tokens, num_heads, head_dim, generator=generator, dtype=torch.float64)
            return values.to(dtype).requires_grad_()

        return draw(heads), draw(kv_heads), draw(kv_heads)

    return make
