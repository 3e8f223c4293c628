"""Per-response token log-probs and entropies from a packed forward pass.

Response i's token j is predicted by packed row `score_rows[i, j]`: the group's LAST PROMPT row for
j = 0 (that row is shared by all N responses of the group) and the response's own row j - 1
otherwise. Both entry points compute the softmax in fp32, chunk over those rows so that no
(T, vocab) fp32 tensor ever exists, and recompute each chunk in backward. The softmax statistics
and the gradient of a chunk come from the token-score operators (C++/CUDA,
include/dualkv/token_scores.h): one read of the chunk's logits forward, one read and one write
backward. A shared prompt row receives the sum of the gradients of the N first tokens that it
scores.

Results are (num_responses, max_R) float32 in packing order, zeros past each response's end.
"""

from __future__ import annotations

import math
import numbers

import torch

from .packing import PackedBatch

__all__ = ["response_logprobs", "response_logprobs_from_hidden"]

# fp32 elements of one chunk of logits (256 MiB): big enough to keep the matmuls efficient, small
# next to the activations of a long packed batch.
_CHUNK_ELEMENTS = 1 << 26


def response_logprobs(
    logits: torch.Tensor,
    packed: PackedBatch,
    *,
    temperature: float = 1.0,
    return_entropy: bool = False,
    chunk_rows: int | None = None,
):
    """Log-probs of every response token from packed logits (1, T, vocab) or (T, vocab).

    The logits may be fp16/bf16/fp32; the softmax over logits / temperature runs in fp32.
    Returns logprobs (num_responses, max_R) float32, or (logprobs, entropy) with return_entropy,
    entropy being that of the distribution each token was sampled from. Differentiable.
    """
    logits2d = _rows_2d(logits, packed.num_tokens, "logits", "packed tokens")
    return _select(_scores_from_logits(logits2d, packed, 0, temperature, chunk_rows), return_entropy)


def response_logprobs_from_hidden(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    packed: PackedBatch,
    *,
    temperature: float = 1.0,
    return_entropy: bool = False,
    chunk_rows: int | None = None,
):
    """Like `response_logprobs`, from final hidden states (1, T, D) or (T, D) and the LM head
    weight (vocab, D), without ever holding the logits of all scored rows: each chunk of rows is
    projected, reduced and dropped, and projected again in backward. Gradients flow to both
    hidden_states and lm_head_weight (the weight's accumulated in fp32 across chunks)."""
    hidden2d = _rows_2d(hidden_states, packed.num_tokens, "hidden_states", "packed tokens")
    scores = _scores_from_hidden(hidden2d, lm_head_weight, packed, 0, temperature, chunk_rows)
    return _select(scores, return_entropy)


def _scores_from_logits(logits2d, packed: PackedBatch, first_row: int, temperature, chunk_rows):
    """(logprob, entropy) in the response layout for the tokens that packed rows [first_row,
    first_row + len(logits2d)) score, zeros for the others (scored by rows not given here)."""
    scoring = _Scoring(packed, logits2d.device, logits2d.shape[1], temperature, chunk_rows, first_row, len(logits2d))
    return scoring.to_response_layout(*_LogProbsFromLogits.apply(logits2d, scoring))


def _scores_from_hidden(hidden2d, lm_head_weight, packed: PackedBatch, first_row: int, temperature, chunk_rows):
    """`_scores_from_logits` from the hidden states of those rows and the LM head weight."""
    if not isinstance(lm_head_weight, torch.Tensor):
        raise TypeError(f"lm_head_weight: expected a torch.Tensor, got {type(lm_head_weight).__name__}")
    if lm_head_weight.dim() != 2 or lm_head_weight.shape[1] != hidden2d.shape[1]:
        raise ValueError(f"lm_head_weight: expected (vocab, {hidden2d.shape[1]}), got {tuple(lm_head_weight.shape)}")
    if lm_head_weight.device != hidden2d.device:
        raise ValueError(f"lm_head_weight: on {lm_head_weight.device}, hidden_states on {hidden2d.device}")
    scoring = _Scoring(
        packed, hidden2d.device, lm_head_weight.shape[0], temperature, chunk_rows, first_row, len(hidden2d)
    )
    return scoring.to_response_layout(*_LogProbsFromHidden.apply(hidden2d, lm_head_weight, scoring))


def _select(scores, return_entropy: bool):
    return scores if return_entropy else scores[0]


class _Scoring:
    """Which packed rows score which tokens, arranged for chunked processing.

    A "use" is one (response token, scoring row) pair, M = sum R_i in total, in row-major order
    of the response layout. Only the uses scored by the given rows [first_row, first_row +
    num_rows) are kept (all of them for a whole packed batch, this rank's for a sequence shard);
    rows are numbered from first_row. Unique scoring rows (a shared prompt row once) are processed
    in chunks of `chunk_rows`; `chunks()` lists them, each with the uses it serves (_Chunk).
    """

    def __init__(
        self,
        packed: PackedBatch,
        device,
        vocab: int,
        temperature: float,
        chunk_rows: int | None,
        first_row: int,
        num_rows: int,
    ):
        if not isinstance(packed, PackedBatch):
            raise TypeError(f"packed: expected a dualkv.PackedBatch, got {type(packed).__name__}")
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
            raise TypeError(f"temperature: expected a real number, got {type(temperature).__name__}")
        # An infinite temperature would make every distribution uniform without a word.
        if not (math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature: must be finite and > 0, got {temperature}")
        if chunk_rows is not None and (isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int)):
            raise TypeError(f"chunk_rows: expected an int or None, got {type(chunk_rows).__name__}")
        if chunk_rows is not None and chunk_rows < 1:
            raise ValueError(f"chunk_rows: must be >= 1, got {chunk_rows}")
        mask = packed.response_mask.to(device)
        self.shape = tuple(mask.shape)
        slots = mask.reshape(-1).nonzero().squeeze(1)
        score_rows = packed.score_rows.to(device)[mask]
        targets = packed.input_ids.to(device)[0][packed.token_rows.to(device)[mask]]
        if int(targets.max()) >= vocab or int(targets.min()) < 0:
            raise ValueError(f"packed: response token ids must lie in [0, {vocab}) (the vocabulary of the logits)")
        given = (score_rows >= first_row) & (score_rows < first_row + num_rows)
        self.slots, self.targets, score_rows = slots[given], targets[given], score_rows[given] - first_row
        self.rows, use_row = torch.unique(score_rows, return_inverse=True)
        self.use_order = torch.argsort(use_row, stable=True)
        sorted_use_row = use_row[self.use_order]
        # Row i's uses are use_order[use_offsets[i]:use_offsets[i + 1]] (CSR by row).
        self.use_offsets = torch.searchsorted(sorted_use_row, torch.arange(self.rows.numel() + 1, device=device))
        self.inv_temperature = 1.0 / temperature
        chunk_rows = chunk_rows or max(1, _CHUNK_ELEMENTS // vocab)
        starts = list(range(0, self.rows.numel(), chunk_rows)) + [self.rows.numel()]
        # The chunks' use ranges in one host read, so that no chunk waits for the device.
        use_bounds = self.use_offsets[torch.tensor(starts, device=device)].tolist()
        self._chunks = [
            _Chunk(self, starts[i], starts[i + 1], use_bounds[i], use_bounds[i + 1], sorted_use_row)
            for i in range(len(starts) - 1)
        ]

    def chunks(self):
        """The chunks of unique scoring rows, in row order."""
        return self._chunks

    def to_response_layout(self, logprob: torch.Tensor, entropy: torch.Tensor):
        def scatter(values):
            flat = values.new_zeros(self.shape[0] * self.shape[1]).scatter(0, self.slots, values)
            return flat.view(self.shape)

        return scatter(logprob), scatter(entropy)


class _Chunk:
    """Unique scoring rows [first, last) of a _Scoring and the uses they serve: `uses` (indices
    into the scoring's uses, sorted by row), `local` (each use's row within the chunk) and
    `offsets` (CSR by row within the chunk, last - first + 1 int64 values)."""

    def __init__(self, scoring: _Scoring, first: int, last: int, use_begin: int, use_end: int, sorted_use_row):
        self.first, self.last = first, last
        self.rows = scoring.rows[first:last]
        self.uses = scoring.use_order[use_begin:use_end]
        self.local = sorted_use_row[use_begin:use_end] - first
        self.offsets = scoring.use_offsets[first : last + 1] - use_begin
        self.targets = scoring.targets[self.uses].long()


def _kernel_logits(logits: torch.Tensor) -> torch.Tensor:
    """The token-score kernels read float32, float16 and bfloat16 logits; others go as float32."""
    return logits if logits.dtype in (torch.float32, torch.float16, torch.bfloat16) else logits.float()


def _chunked_forward(scoring: _Scoring, logits_of, device):
    """Per-use log-prob and entropy, and per-row log-normaliser and entropy (for the backward),
    one chunk of scoring rows at a time: one fused read of each chunk's logits
    (torch.ops.dualkv.token_scores_forward)."""
    uses, rows = scoring.targets.numel(), scoring.rows.numel()
    logprob = torch.empty(uses, dtype=torch.float32, device=device)
    entropy = torch.empty(uses, dtype=torch.float32, device=device)
    row_lse = torch.empty(rows, dtype=torch.float32, device=device)
    row_entropy = torch.empty(rows, dtype=torch.float32, device=device)
    for chunk in scoring.chunks():
        logits = _kernel_logits(logits_of(chunk.rows))
        lse, chunk_entropy = torch.ops.dualkv.token_scores_forward(logits, scoring.inv_temperature)
        row_lse[chunk.first : chunk.last] = lse
        row_entropy[chunk.first : chunk.last] = chunk_entropy
        target_logits = logits[chunk.local, chunk.targets].float()
        logprob[chunk.uses] = target_logits * scoring.inv_temperature - lse[chunk.local]
        entropy[chunk.uses] = chunk_entropy[chunk.local]
    return logprob, entropy, row_lse, row_entropy


def _chunked_grads(scoring: _Scoring, logits_of, row_lse, row_entropy, grad_logprob, grad_entropy):
    """Yields (rows, dL/d logits of those rows) per chunk, each row's uses summed, from one read
    of the chunk's logits (torch.ops.dualkv.token_scores_backward, given the forward's per-row
    statistics). dtype: the logits' (float32 for logits of another dtype)."""
    zeros = torch.zeros(scoring.targets.numel(), dtype=torch.float32, device=row_lse.device)
    grad_logprob = zeros if grad_logprob is None else grad_logprob.float()
    grad_entropy = zeros if grad_entropy is None else grad_entropy.float()
    for chunk in scoring.chunks():
        logits = _kernel_logits(logits_of(chunk.rows))
        grad = torch.ops.dualkv.token_scores_backward(
            logits,
            scoring.inv_temperature,
            row_lse[chunk.first : chunk.last],
            row_entropy[chunk.first : chunk.last],
            chunk.offsets,
            chunk.targets,
            grad_logprob[chunk.uses],
            grad_entropy[chunk.uses],
        )
        yield chunk.rows, grad


class _LogProbsFromLogits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits2d: torch.Tensor, scoring: _Scoring):
        ctx.set_materialize_grads(False)
        logprob, entropy, row_lse, row_entropy = _chunked_forward(scoring, _logits_rows(logits2d), logits2d.device)
        ctx.save_for_backward(logits2d, row_lse, row_entropy)
        ctx.scoring = scoring
        return logprob, entropy

    @staticmethod
    def backward(ctx, grad_logprob, grad_entropy):
        logits2d, row_lse, row_entropy = ctx.saved_tensors
        grad_logits = torch.zeros_like(logits2d)
        chunk_grads = _chunked_grads(
            ctx.scoring, _logits_rows(logits2d), row_lse, row_entropy, grad_logprob, grad_entropy
        )
        for rows, grad in chunk_grads:
            grad_logits[rows] = grad.to(grad_logits.dtype)
        return grad_logits, None


class _LogProbsFromHidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden2d: torch.Tensor, weight: torch.Tensor, scoring: _Scoring):
        ctx.set_materialize_grads(False)
        logits_of = _projected_rows(hidden2d, weight)
        logprob, entropy, row_lse, row_entropy = _chunked_forward(scoring, logits_of, hidden2d.device)
        ctx.save_for_backward(hidden2d, weight, row_lse, row_entropy)
        ctx.scoring = scoring
        return logprob, entropy

    @staticmethod
    def backward(ctx, grad_logprob, grad_entropy):
        hidden2d, weight, row_lse, row_entropy = ctx.saved_tensors
        need_hidden, need_weight, _ = ctx.needs_input_grad
        grad_hidden = torch.zeros_like(hidden2d) if need_hidden else None
        # Every chunk adds into the whole weight gradient: accumulate in fp32, round once.
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_weight else None
        chunk_grads = _chunked_grads(
            ctx.scoring, _projected_rows(hidden2d, weight), row_lse, row_entropy, grad_logprob, grad_entropy
        )
        for rows, grad in chunk_grads:
            grad = grad.to(weight.dtype)
            if need_hidden:
                grad_hidden[rows] = (grad @ weight).to(grad_hidden.dtype)
            if need_weight:
                _accumulate_product(grad_weight, grad.T, hidden2d[rows].to(weight.dtype))
        return grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype), None


def _accumulate_product(total: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """total (fp32) += a @ b for 16-bit a and b. On CUDA the GEMM adds into `total` itself (cuBLAS
    with an fp32 C, beta = 1): a chunk's product is never rounded to 16 bits, and no fp32 copy and
    separate add pass over the (vocab, D) weight-sized tensor are made per chunk."""
    if total.is_cuda and a.dtype in (torch.float16, torch.bfloat16):
        torch.addmm(total, a, b, out_dtype=torch.float32, out=total)
    else:
        total += (a @ b).float()


def _logits_rows(logits2d: torch.Tensor):
    return lambda rows: logits2d[rows]


def _projected_rows(hidden2d: torch.Tensor, weight: torch.Tensor):
    # The projection runs in the model's dtype, as the LM head itself does; the softmax in fp32.
    return lambda rows: hidden2d[rows].to(weight.dtype) @ weight.T


def _rows_2d(tensor: torch.Tensor, rows: int, name: str, what: str) -> torch.Tensor:
    """(1, T, X) or (T, X) -> (T, X), checking T against the number of rows expected."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type == "meta":
        raise ValueError(f"{name}: a tensor on the meta device holds no values to score; pass real {name}")
    if tensor.dim() == 3 and tensor.shape[0] == 1:
        tensor = tensor[0]
    if tensor.dim() != 2 or tensor.shape[0] != rows:
        raise ValueError(f"{name}: expected (1, T, X) or (T, X) with T = {rows} {what}, got {tuple(tensor.shape)}")
    return tensor
