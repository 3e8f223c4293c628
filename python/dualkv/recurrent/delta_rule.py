"""The gated delta rule (Gated DeltaNet's recurrence) in PyTorch, varlen, with initial and final
states per sequence: dualkv's CPU implementation, written from the recurrence itself.

Per head, with a state S of shape (K, V) and, at each token, a query q, key k (K,), value v (V,),
log-decay g <= 0 and write strength beta in [0, 1]:

    q, k <- q / |q|, k / |k|           (with use_qk_l2norm: x * rsqrt(sum x^2 + 1e-6))
    S    <- exp(g) S                   (decay)
    S    <- S + k (beta (v - S^T k))^T (delta rule: move the value stored under k towards v)
    o     = S^T q * scale              (scale = 1 / sqrt(K) unless given)

All of it in float32 (float64 for float64 inputs), one step per token, every sequence of the call
advancing together: the sequences are padded to the longest, and a padded step has g = 0 and
beta = 0, which leaves the state exactly as it was, so each final state is the state after the
sequence's own last token.
"""

from __future__ import annotations

import torch

__all__ = ["gated_delta_rule_reference"]

L2NORM_EPS = 1e-6


def gated_delta_rule_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    *,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    scale: float | None = None,
    use_qk_l2norm: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """q, k: (T, H, K); v: (T, H, V); g, beta: (T, H); cu_seqlens: (n+1,) offsets of n sequences
    (host-readable); initial_state: (n, H, K, V) or None (zeros). Returns o (T, H, V) in q's dtype
    and, with output_final_state, the final states (n, H, K, V) in the compute dtype, float32 or
    float64 (else None)."""
    offsets = [int(x) for x in cu_seqlens.tolist()]
    n, heads, key_dim, value_dim = len(offsets) - 1, q.shape[1], q.shape[2], v.shape[2]
    lengths = [end - begin for begin, end in zip(offsets[:-1], offsets[1:])]
    if n < 1 or offsets[0] != 0 or offsets[-1] != q.shape[0] or min(lengths) < 1:
        raise ValueError(
            f"cu_seqlens: expected increasing offsets from 0 to T = {q.shape[0]} (each sequence >= 1 token), "
            f"got {offsets}"
        )
    if initial_state is not None and initial_state.shape != (n, heads, key_dim, value_dim):
        raise ValueError(
            f"initial_state: expected (n, H, K, V) = {(n, heads, key_dim, value_dim)}, got {tuple(initial_state.shape)}"
        )
    longest = max(lengths)
    # (n, longest) gather of the packed rows; padded steps read row T, all zeros.
    rows = torch.full((n, longest), q.shape[0], dtype=torch.int64)
    for i, (begin, length) in enumerate(zip(offsets, lengths)):
        rows[i, :length] = torch.arange(begin, begin + length)
    rows = rows.to(q.device)

    compute = torch.promote_types(q.dtype, torch.float32)

    def padded(x: torch.Tensor) -> torch.Tensor:
        x = x.to(compute)
        x = torch.cat([x, x.new_zeros(1, *x.shape[1:])])
        return x.index_select(0, rows.view(-1)).view(n, longest, *x.shape[1:])

    qs, ks, vs, gs, betas = (padded(x) for x in (q, k, v, g, beta))
    if use_qk_l2norm:
        qs, ks = (x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2NORM_EPS) for x in (qs, ks))
    qs = qs * (key_dim**-0.5 if scale is None else scale)
    state = (
        q.new_zeros(n, heads, key_dim, value_dim, dtype=compute)
        if initial_state is None
        else initial_state.to(compute)
    )
    outputs = []
    for t in range(longest):
        q_t, k_t, v_t = qs[:, t], ks[:, t], vs[:, t]
        state = state * gs[:, t].exp()[..., None, None]
        stored = torch.einsum("nhk,nhkv->nhv", k_t, state)
        delta = (v_t - stored) * betas[:, t, :, None]
        state = state + k_t[..., :, None] * delta[..., None, :]
        outputs.append(torch.einsum("nhk,nhkv->nhv", q_t, state))
    out = torch.stack(outputs, dim=1).reshape(n * longest, heads, value_dim)
    valid = (rows.view(-1) < q.shape[0]).nonzero().squeeze(1)
    # The valid entries of `rows`, in row-major order, are the packed rows 0..T-1 in order.
    o = out.index_select(0, valid).to(q.dtype)
    return o, (state if output_final_state else None)
