"""python -m dualkv.training.compare: one policy update on the packed batch against the same
update on the N-copy batch a standard trainer runs, on the same weights and rollouts.

The packed side is `policy_update` (micro-batches, dualkv attention, log-probs from hidden
states); the N-copy side pads one [prompt; response] row per response, runs PyTorch's SDPA
attention and scores each row's response tokens. Both take an SGD step with learning rate 1 and
no clipping, so the parameter change IS the gradient; the command prints both losses, gradient
norms, the largest per-parameter gradient difference and the token counts, then whether the two
updates agree within fp32 tolerance (exit status 1 when they do not).
"""

from __future__ import annotations

import copy
import sys
import time

import torch
from transformers import AutoModelForCausalLM

from .. import losses
from . import compare_options
from .models import MODEL_CONFIGS, build_model
from .parallel import Parallelism
from .policy import PackedPolicy
from .rollouts import RolloutGroup, synthetic_rollouts
from .step import UpdateConfig, policy_update

# fp32 on a CPU: the packed and N-copy updates sum the same terms in different orders, which moves
# the loss by ~1e-7 relative and a parameter's gradient by ~1e-4 at most (a norm's weight, whose
# gradient sums over every token); a wrong mask, position or log-prob row is an O(1) difference.
LOSS_TOLERANCE = 1e-4
GRADIENT_TOLERANCE = 1e-3


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    torch.manual_seed(args.seed)
    packed_lm = build_model(args.model, seed=args.seed)
    ncopy_lm = AutoModelForCausalLM.from_config(copy.deepcopy(packed_lm.config), attn_implementation="sdpa")
    ncopy_lm.load_state_dict(packed_lm.state_dict())
    rollouts = synthetic_rollouts(
        args.groups, args.responses, args.prompt_length, tuple(args.response_length),
        packed_lm.config.vocab_size, args.seed,
    )
    # A reference a little away from the policy, so the KL term (GRPO) is not zero.
    reference_lm = copy.deepcopy(ncopy_lm)
    with torch.no_grad():
        for p in reference_lm.parameters():
            p.add_(0.01 * torch.randn_like(p))
    config = (UpdateConfig.grpo if args.loss == "grpo" else UpdateConfig.dapo)(args.max_tokens, max_grad_norm=float("inf"))

    reference = PackedPolicy(build_model(args.model, seed=args.seed))
    reference.lm.load_state_dict(reference_lm.state_dict())
    before = {n: p.detach().clone() for n, p in packed_lm.named_parameters()}
    start = time.perf_counter()
    packed = policy_update(
        PackedPolicy(packed_lm), torch.optim.SGD(packed_lm.parameters(), lr=1.0), rollouts, config,
        Parallelism.single(), reference=reference,
    )
    packed_seconds = time.perf_counter() - start
    packed_grads = {n: before[n] - p.detach() for n, p in packed_lm.named_parameters()}

    start = time.perf_counter()
    ncopy_loss = _ncopy_loss(ncopy_lm, reference_lm, rollouts, config)
    ncopy_loss.backward()
    ncopy_seconds = time.perf_counter() - start
    ncopy_grads = {n: p.grad for n, p in ncopy_lm.named_parameters()}
    ncopy_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in ncopy_grads.values()])))
    worst_name, worst = max(
        ((n, float((packed_grads[n] - g).norm() / g.norm().clamp(min=1e-30))) for n, g in ncopy_grads.items()),
        key=lambda item: item[1],
    )
    result = {
        "packed_tokens": packed["packed_tokens"], "ncopy_tokens": packed["ncopy_tokens"],
        "packed_loss": packed["loss"], "ncopy_loss": float(ncopy_loss.detach()),
        "packed_grad_norm": packed["grad_norm"], "ncopy_grad_norm": ncopy_norm,
        "max_gradient_error": worst, "worst_parameter": worst_name,
        "packed_seconds": packed_seconds, "ncopy_seconds": ncopy_seconds,
    }
    result["equal"] = (
        abs(result["packed_loss"] - result["ncopy_loss"]) <= LOSS_TOLERANCE * abs(result["ncopy_loss"])
        and worst <= GRADIENT_TOLERANCE
    )
    _report(args, result)
    return result


def _ncopy_loss(model, reference, rollouts: list[RolloutGroup], config: UpdateConfig) -> torch.Tensor:
    """The loss a trainer computes on the N-copy batch: one right-padded row per response, old and
    reference log-probs from forward-only passes, as `policy_update` computes them."""
    rows = [(g.prompt, r) for g in rollouts for r in g.responses]
    width = max(len(p) + len(r) for p, r in rows)
    max_r = max(len(r) for _, r in rows)
    input_ids = torch.zeros(len(rows), width, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    # Row b's response token j sits at column P_b + j and is predicted by column P_b + j - 1.
    columns = torch.zeros(len(rows), max_r, dtype=torch.long)
    mask = torch.zeros(len(rows), max_r, dtype=torch.bool)
    for b, (prompt, response) in enumerate(rows):
        tokens = prompt + response
        input_ids[b, : len(tokens)] = torch.tensor(tokens)
        attention_mask[b, : len(tokens)] = 1
        columns[b, : len(response)] = torch.arange(len(prompt), len(tokens))
        mask[b, : len(response)] = True

    def logprobs(lm):
        logits = lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits.float()
        scores = torch.log_softmax(logits.gather(1, (columns - 1).clamp(min=0)[..., None].expand(-1, -1, logits.shape[-1])), -1)
        return torch.where(mask, scores.gather(2, input_ids.gather(1, columns)[..., None])[..., 0], 0.0)

    with torch.no_grad():
        old, ref = logprobs(model), logprobs(reference)
    current = logprobs(model)
    groups = torch.repeat_interleave(torch.arange(len(rollouts)), torch.tensor([len(g.responses) for g in rollouts]))
    advantages = losses.group_advantages(torch.tensor([r for g in rollouts for r in g.rewards]), groups)
    return losses.policy_loss(
        current, old, advantages, mask, clip_low=config.clip_low, clip_high=config.clip_high,
        aggregation=config.aggregation, ref_logprobs=ref, kl_coef=config.kl_coef,
    )


def _report(args, r: dict) -> None:
    print(
        f"one {args.loss.upper()} policy update, {args.model} on CPU, fp32: {args.groups} groups x N={args.responses}, "
        f"P={args.prompt_length}, R in [{args.response_length[0]}, {args.response_length[1]}]\n"
        f"  tokens     packed {r['packed_tokens']} vs N-copy {r['ncopy_tokens']} "
        f"({r['ncopy_tokens'] / r['packed_tokens']:.2f}x fewer)\n"
        f"  loss       packed {r['packed_loss']:+.8e}   N-copy {r['ncopy_loss']:+.8e}\n"
        f"  grad norm  packed {r['packed_grad_norm']:.8e}   N-copy {r['ncopy_grad_norm']:.8e}\n"
        f"  gradients  largest relative difference of a parameter's gradient: {r['max_gradient_error']:.2e} "
        f"({r['worst_parameter']})\n"
        f"  time       packed {r['packed_seconds']:.2f} s   N-copy {r['ncopy_seconds']:.2f} s "
        "(not a speed comparison on a CPU; the GPU one is the repository's bench/run_step_bench.py)\n"
        + (
            f"EQUAL: losses within {LOSS_TOLERANCE:g} and every gradient within {GRADIENT_TOLERANCE:g} (relative)"
            if r["equal"]
            else f"DIFFERENT: the packed update does not match the N-copy one (tolerances {LOSS_TOLERANCE:g}, "
            f"{GRADIENT_TOLERANCE:g})"
        )
    )


def _parse(argv):
    options = compare_options.parser()
    args = options.parse_args(argv)
    if args.model not in MODEL_CONFIGS:
        options.error(f"argument --model: must be one of {', '.join(sorted(MODEL_CONFIGS))}, got {args.model!r}")
    return args

if __name__ == "__main__":
    sys.exit(0 if main()["equal"] else 1)
