"""veRL's engine path on a CPU, for the veRL integration tests.

veRL's FSDPEngine builds its model on an accelerator (device mesh, FSDP, `get_device_id()`), so
these tests run the engine's per-micro-batch path (`forward_backward_batch` -> `forward_step` ->
prepare_model_inputs / module / prepare_model_outputs / loss) on an engine object whose module is
a plain CPU model, and point veRL's two device lookups at the CPU. Everything between the batch
and the gradients is veRL's own code, the baseline its padding-free path (`use_remove_padding`).
"""

import copy
import functools
import types

import torch
from verl.utils import tensordict_utils as tu
from verl.workers.config import FSDPActorConfig
from verl.workers.engine.fsdp import transformer_impl
from verl.workers.utils.losses import ppo_loss
from verl.workers.utils.padding import left_right_2_no_padding

from dualkv.integrations.verl.engine import DualKVFSDPEngineWithLMHead, enable_packed_scoring

PAD = 0


def run_on_cpu(monkeypatch):
    monkeypatch.setattr(transformer_impl, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(transformer_impl, "get_device_name", lambda: "cpu")


def bare_engine(cls, module):
    """An engine of class `cls` around `module`, with the attributes its micro-batch path reads."""
    engine = object.__new__(cls)
    engine.module = module
    engine.use_ulysses_sp = False
    engine.ulysses_sequence_parallel_size = 1
    engine.pad_to_length = False
    engine._autocast_dtype = torch.float32  # fp32: forward_step skips autocast
    engine.scaler = None
    engine.engine_config = types.SimpleNamespace(
        entropy_checkpointing=False, entropy_from_logits_with_chunking=False, use_no_sync_for_gradient_accumulation=True
    )
    from verl.utils import torch_functional as verl_F

    engine.compute_entropy_from_logits = verl_F.entropy_from_logits
    engine.get_data_parallel_group = lambda: None
    engine.get_data_parallel_size = lambda: 1
    return engine


def engine_pair(model):
    """(veRL's FSDPEngineWithLMHead, DualKVFSDPEngineWithLMHead) on two copies of `model`."""
    plain = bare_engine(transformer_impl.FSDPEngineWithLMHead, copy.deepcopy(model))
    packed = bare_engine(DualKVFSDPEngineWithLMHead, enable_packed_scoring(copy.deepcopy(model)))
    return plain, packed


def rollout_batch(rows, generator, micro_batch_size, temperature=0.8, calculate_entropy=True):
    """veRL's actor-update TensorDict for rows (prompt, response, uid): left-padded prompts,
    right-padded responses, then veRL's own left_right_2_no_padding."""
    num_rows = len(rows)
    prompt_width = max(len(p) for p, _, _ in rows)
    response_width = max(len(r) for _, r, _ in rows)
    prompts = torch.full((num_rows, prompt_width), PAD)
    responses = torch.full((num_rows, response_width), PAD)
    attention_mask = torch.zeros(num_rows, prompt_width + response_width, dtype=torch.long)
    for b, (prompt, response, _) in enumerate(rows):
        prompts[b, prompt_width - len(prompt) :] = torch.tensor(prompt)
        attention_mask[b, prompt_width - len(prompt) : prompt_width] = 1
        if response:
            responses[b, : len(response)] = torch.tensor(response)
            attention_mask[b, prompt_width : prompt_width + len(response)] = 1
    response_mask = attention_mask[:, prompt_width:].clone()
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    td = tu.get_tensordict(
        {
            "input_ids": torch.cat([prompts, responses], dim=1),
            "prompts": prompts,
            "responses": responses,
            "attention_mask": attention_mask,
            "response_mask": response_mask,
            "position_ids": position_ids,
            "old_log_probs": -4.0 + 0.3 * torch.randn(num_rows, response_width, generator=generator),
            "ref_log_prob": -4.0 + 0.3 * torch.randn(num_rows, response_width, generator=generator),
            "advantages": torch.randn(num_rows, 1, generator=generator).expand(-1, response_width).contiguous(),
            "uid": [uid for _, _, uid in rows],
        },
        {
            "temperature": temperature,
            "calculate_entropy": calculate_entropy,
            "use_remove_padding": True,
            "use_dynamic_bsz": False,
            "micro_batch_size_per_gpu": micro_batch_size,
            "global_batch_size": num_rows,
        },
    )
    return left_right_2_no_padding(td)


def actor_config(**overrides):
    settings = dict(
        strategy="fsdp2",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=1,
        use_dynamic_bsz=False,
        loss_agg_mode="token-mean",
        use_kl_loss=True,
        kl_loss_coef=0.05,
        entropy_coeff=0.01,
    )
    settings.update(overrides)
    return FSDPActorConfig(**settings)


def loss_function(config):
    return functools.partial(ppo_loss, config)
