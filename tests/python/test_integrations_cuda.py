"""The trainer integrations on a GPU with dualkv's CUDA kernels, bf16 mixed precision (fp32 weights,
bf16 autocast) on a tiny Qwen3 (head_dim 64): one TRL GRPO step (loss and gradients) and one veRL
actor update, each against the unmodified trainer. The bf16 rule of the repository: the packed
run's error against the fp32 result is at most twice the unmodified trainer's own bf16 error.
Prints the time of both runs (a tiny model: the times show overheads, not the kernels' speed)."""

import time

import pytest
import torch

import dualkv

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or not dualkv.cuda_compiled(), reason="needs a GPU and dualkv's CUDA kernels"
)

HEAD_DIM = 64


def relative_error(got: dict, exact: dict) -> float:
    """Relative L2 error over all gradients together."""
    diff = sum(float((got[k].double() - exact[k].double()).pow(2).sum()) for k in exact)
    norm = sum(float(exact[k].double().pow(2).sum()) for k in exact)
    return (diff / norm) ** 0.5


def timed(step):
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = step()
    torch.cuda.synchronize()
    return result, time.perf_counter() - start


def test_trl_grpo_step_bf16(tmp_path):
    pytest.importorskip("trl")
    from test_integration_trl import BATCHES, loss_inputs
    from trl_support import trainer_pair

    inputs = {k: v.cuda() for k, v in loss_inputs(BATCHES["shuffled"], torch.Generator().manual_seed(7)).items()}
    fp32_plain, _ = trainer_pair(tmp_path / "fp32", {"use_cpu": False}, head_dim=HEAD_DIM)
    plain, packed = trainer_pair(tmp_path / "bf16", {"use_cpu": False, "bf16": True}, head_dim=HEAD_DIM)
    results = {}
    for name, trainer in (("fp32", fp32_plain), ("plain bf16", plain), ("dualkv bf16", packed)):
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        trainer.model.zero_grad(set_to_none=True)
        trainer.compute_loss(trainer.model, inputs).backward()  # warm-up: kernels, self-check
        trainer.model.zero_grad(set_to_none=True)
        loss, seconds = timed(lambda t=trainer: _loss_and_backward(t, inputs))
        grads = {k: p.grad.float().clone() for k, p in trainer.model.named_parameters()}
        results[name] = (loss, grads)
        print(f"TRL GRPO step, {name}: {seconds * 1e3:.1f} ms, loss {loss:.6f}")
    exact_loss, exact_grads = results["fp32"]
    plain_error = relative_error(results["plain bf16"][1], exact_grads)
    packed_error = relative_error(results["dualkv bf16"][1], exact_grads)
    print(f"gradient relative error vs fp32: plain {plain_error:.2e}, dualkv {packed_error:.2e}")
    assert 0 < plain_error and packed_error <= 2 * plain_error
    assert abs(results["dualkv bf16"][0] - exact_loss) <= 2 * abs(results["plain bf16"][0] - exact_loss) + 1e-4


def _loss_and_backward(trainer, inputs):
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return float(loss)


def test_verl_actor_update_bf16():
    pytest.importorskip("verl")
    import torch.distributed as dist
    from test_integration_verl import BATCHES
    from trl_support import tiny_qwen3
    from verl_support import actor_config, engine_pair, loss_function, rollout_batch

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29561", rank=0, world_size=1)
    rows, micro_batch_size = BATCHES["shuffled_split_groups"]
    data = rollout_batch(rows, torch.Generator().manual_seed(2), micro_batch_size)
    model = tiny_qwen3(0, head_dim=HEAD_DIM).cuda()
    fp32_plain, _ = engine_pair(model)
    plain, packed = engine_pair(model)
    plain._autocast_dtype = packed._autocast_dtype = torch.bfloat16
    config = actor_config()
    results = {}
    for name, engine in (("fp32", fp32_plain), ("plain bf16", plain), ("dualkv bf16", packed)):
        engine.forward_backward_batch(data, loss_function(config), forward_only=False)  # warm-up
        engine.module.zero_grad(set_to_none=True)
        output, seconds = timed(lambda e=engine: e.forward_backward_batch(data, loss_function(config)))
        grads = {k: p.grad.float().clone() for k, p in engine.module.named_parameters()}
        results[name] = grads
        print(f"veRL actor update, {name}: {seconds * 1e3:.1f} ms, losses {output['loss']}")
    plain_error = relative_error(results["plain bf16"], results["fp32"])
    packed_error = relative_error(results["dualkv bf16"], results["fp32"])
    print(f"gradient relative error vs fp32: plain {plain_error:.2e}, dualkv {packed_error:.2e}")
    assert 0 < plain_error and packed_error <= 2 * plain_error
