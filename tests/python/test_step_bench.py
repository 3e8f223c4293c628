"""bench/run_step_bench.py on a CPU (tiny Qwen3, tiny Qwen3.5): the code path the GPU run takes, its
outputs and numbers; its fit probe and out-of-memory retry (out-of-memory errors simulated); the
micro-batching and work counts it reports; the baselines' attention plumbing; and
bench/run_recurrent_bench.py's code path."""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest
import torch
import torch.nn.attention.varlen
from distributed_support import run_ranks
from training_support import rollouts

import dualkv
from dualkv.distributed import shard_sequence
from dualkv.training import PackedPolicy, init_parallelism, synthetic_rollouts
from dualkv.training.models import build_model, model_config

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import run_step_bench as bench  # noqa: E402
import step_attention  # noqa: E402
import step_report  # noqa: E402
import step_workload as work  # noqa: E402


def _run_bench(tmp_path, *options):
    """run_step_bench.py on the CPU in a subprocess, its report written under tmp_path."""
    return subprocess.run(
        [sys.executable, str(BENCH / "run_step_bench.py"), "--device", "cpu", "--out", str(tmp_path), *options],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def test_cpu_run_writes_the_report_with_rates_and_fits(tmp_path):
    result = _run_bench(tmp_path, "--model", "tiny-qwen3", "--prompt-lengths", "32", "--responses", "2", "3",
                        "--response-length", "3", "9", "--max-fit", "4", "--repeats", "2", "--peak-tflops", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "flash_ncopy: skipped, PyTorch's FlashAttention varlen kernel runs on CUDA only" in result.stdout
    # Progress as it happens, so that a run stopped by a time limit shows where it was.
    lines = result.stdout.splitlines()
    assert any(line.startswith("tiny-qwen3: model built in ") for line in lines)
    assert sum(line.startswith("warm-up: 1 step(s) in ") for line in lines) == 2  # one per (P, N)
    report = json.loads((tmp_path / "step_bench.json").read_text())
    assert [(e["P"], e["N"]) for e in report["entries"]] == [(32, 2), (32, 3)]
    for entry in report["entries"]:
        assert list(entry["methods"]) == ["dualkv"]
        run = entry["methods"]["dualkv"]
        assert run["status"] == "ok" and run["micro_batch"] == entry["N"] and run["largest_micro_batch"] == 4
        assert run["ncopy_tokens_per_s"] == pytest.approx(entry["ncopy_tokens"] / run["step_s"])
        assert entry["ncopy_tokens"] > entry["packed_tokens"]
        assert 0 < run["mfu_honest"] < run["mfu_effective"]  # same time, more FLOPs counted
    # The first configuration's log-probs are every method's cross-check; dualkv is its own reference.
    assert report["entries"][0]["methods"]["dualkv"]["logprob_max_abs_diff_vs_dualkv"] == 0.0
    assert (tmp_path / "step_bench.txt").read_text().count("dualkv") == 2
    try:
        import matplotlib  # noqa: F401  (optional: without it the run says so and writes no plot)
    except ImportError:
        assert "step_bench.png not written: matplotlib is not installed" in result.stdout
    else:
        assert (tmp_path / "step_bench.png").stat().st_size > 0


def test_cpu_run_of_the_tiny_moe_model(tmp_path):
    result = _run_bench(tmp_path, "--model", "tiny-qwen3-moe", "--prompt-lengths", "16", "--responses", "2",
                        "--response-length", "3", "9", "--max-fit", "1", "--warmup", "0", "--repeats", "1",
                        "--peak-tflops", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "step_bench.json").read_text())
    (entry,) = report["entries"]
    run = entry["methods"]["dualkv"]
    assert report["model"] == "tiny-qwen3-moe" and run["status"] == "ok" and run["largest_micro_batch"] == 1
    assert run["micro_batch"] == 1 and run["micro_steps"] == 2  # the fit, not --micro-batch's default N
    assert 0 < run["mfu_honest"] < run["mfu_effective"]


def test_max_fit_zero_steps_at_the_given_micro_batch_without_a_search(tmp_path):
    result = _run_bench(tmp_path, "--model", "tiny-qwen3", "--prompt-lengths", "16", "--responses", "4",
                        "--response-length", "3", "9", "--max-fit", "0", "--micro-batch", "2", "--warmup", "0",
                        "--repeats", "1", "--peak-tflops", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    (entry,) = json.loads((tmp_path / "step_bench.json").read_text())["entries"]
    run = entry["methods"]["dualkv"]
    assert run["status"] == "ok" and "largest_micro_batch" not in run
    assert run["micro_batch"] == 2 and run["micro_steps"] == 2


def test_step_flops_count_the_active_experts_of_a_moe_model():
    tokens, pairs, scored = 100, 2000, 60
    moe = model_config("tiny-qwen3-moe")
    h, heads, kv, d, layers = 128, 4, 2, 64, 2
    attention = 2 * h * heads * d + 2 * h * kv * d
    router, experts = h * 4, 2 * 3 * h * 64  # 4 experts, 2 per token of moe_intermediate_size 64
    forward = layers * (2 * tokens * (attention + router + experts) + 4 * pairs * heads * d) + 2 * scored * h * 512
    assert work.step_flops(moe, tokens, pairs, scored) == pytest.approx(4 * forward)
    # A layer in mlp_only_layers (or off decoder_sparse_step) is dense: 3 h intermediate_size.
    mixed = model_config("tiny-qwen3-moe", mlp_only_layers=[0])
    dense_layer = 3 * h * 256
    assert work.step_flops(mixed, tokens, pairs, scored) - work.step_flops(moe, tokens, pairs, scored) == (
        pytest.approx(4 * 2 * tokens * (dense_layer - router - experts))
    )
    assert work.step_flops(model_config("tiny-qwen3-moe", decoder_sparse_step=2), tokens, pairs, scored) == (
        pytest.approx(work.step_flops(mixed, tokens, pairs, scored))
    )
    # A dense config: every layer 3 h intermediate_size, as before MoE configs were counted.
    dense = model_config("qwen3-8b")
    h, heads, kv, d, layers, vocab = 4096, 32, 8, 128, 36, 151936
    per_token_layer = 2 * h * heads * d + 2 * h * kv * d + 3 * h * 12288
    forward = layers * (2 * tokens * per_token_layer + 4 * pairs * heads * d) + 2 * scored * h * vocab
    assert work.step_flops(dense, tokens, pairs, scored) == pytest.approx(4 * forward)


def test_step_flops_count_gated_deltanet_layers_and_gated_attention():
    tokens, pairs, scored = 100, 2000, 60
    h, heads, kv, d, vocab = 128, 4, 2, 64, 512
    attention = 2 * h * heads * d + 2 * h * kv * d + heads * d * h  # q_proj's second half: the output gate
    value_heads, key_dim, value_dim = 4, 2 * 32, 4 * 32
    conv_dim = 2 * key_dim + value_dim
    gated_deltanet = h * conv_dim + h * value_dim + 2 * h * value_heads + value_dim * h + conv_dim * 4
    gated_deltanet += 3 * value_heads * 32 * 32  # read, write and output per value head
    mlp = 3 * h * 256
    forward = 2 * tokens * (attention + 3 * gated_deltanet + 4 * mlp) + 4 * pairs * heads * d + 2 * scored * h * vocab
    assert work.step_flops(model_config("tiny-qwen3.5"), tokens, pairs, scored) == pytest.approx(4 * forward)
    # Qwen3.5-MoE: every layer sparse, with a shared expert and its gate.
    moe = router, experts, shared = h * 4, 2 * 3 * h * 64, 3 * h * 64 + h
    forward_moe = forward + 2 * tokens * 4 * (sum(moe) - mlp)
    assert work.step_flops(model_config("tiny-qwen3.5-moe"), tokens, pairs, scored) == pytest.approx(4 * forward_moe)


def test_cpu_run_on_a_hybrid_model(tmp_path):
    result = _run_bench(tmp_path, "--model", "tiny-qwen3.5", "--prompt-lengths", "16", "--responses", "3",
                        "--response-length", "3", "9", "--max-fit", "2", "--repeats", "1", "--peak-tflops", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    run = json.loads((tmp_path / "step_bench.json").read_text())["entries"][0]["methods"]["dualkv"]
    assert run["status"] == "ok" and 0 < run["mfu_honest"] < run["mfu_effective"]


def test_recurrent_bench_cpu_run(tmp_path):
    result = subprocess.run(
        [sys.executable, str(BENCH / "run_recurrent_bench.py"), "--device", "cpu", "--dtype", "fp32", "--heads", "2",
         "--key-dim", "8", "--value-dim", "8", "--prompt-lengths", "12", "--responses", "2", "3",
         "--response-length", "2", "6", "--repeats", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "recurrent_bench.json").read_text())
    assert [(e["P"], e["N"]) for e in report["entries"]] == [(12, 2), (12, 3)]
    for entry in report["entries"]:
        assert entry["packed_tokens"] < entry["ncopy_tokens"]
        assert entry["speedup"] == pytest.approx(entry["ncopy"]["ms"] / entry["packed"]["ms"])
        rate = entry["ncopy_tokens"] / entry["packed"]["ms"] * 1e3
        assert entry["packed"]["ncopy_tokens_per_s"] == pytest.approx(rate)


def test_sequence_parallel_run_counts_each_group_once(tmp_path):
    # torchrun over 2 CPU processes as one SP group: both hold data-parallel rank 0's groups, so the
    # report counts them once, as a one-process run of the same seed has them.
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(BENCH / "run_step_bench.py"), "--device", "cpu", "--model", "tiny-qwen3", "--sp", "2",
         "--methods", "dualkv", "--prompt-lengths", "16", "--responses", "3", "--response-length", "3", "9",
         "--warmup", "0", "--repeats", "1", "--peak-tflops", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "step_bench.json").read_text())
    assert report["sp"] == 2 and report["world_size"] == 2
    (entry,) = report["entries"]
    groups = synthetic_rollouts(1, 3, 16, (3, 9), model_config("tiny-qwen3").vocab_size, seed=0)
    assert {key: entry[key] for key in work.batch_counts(groups)} == work.batch_counts(groups)
    run = entry["methods"]["dualkv"]
    assert run["status"] == "ok" and "largest_micro_batch" not in run  # no fit probe beside other ranks
    assert run["packed_tokens_per_s"] == pytest.approx(entry["packed_tokens"] / run["step_s"])
    flops = work.step_flops(model_config("tiny-qwen3"), entry["packed_tokens"], entry["packed_pairs"],
                            entry["scored_tokens"])
    assert run["mfu_honest"] == pytest.approx(flops / run["step_s"] / (1e12 * 2))  # per GPU of both


def _step_with_gradients(policy, micro_batches, advantages):
    """run_step_bench._step's old log-probs and the gradients it accumulated (whole tensors, also
    under FSDP2), taken where the step drops them."""
    gradients = {}

    def capture(set_to_none=True):
        for name, parameter in policy.named_parameters():
            grad = parameter.grad
            gradients[name] = (grad.full_tensor() if hasattr(grad, "full_tensor") else grad).clone()

    policy.zero_grad = capture
    return bench._step(policy, micro_batches, advantages), gradients


def _sequence_parallel_step_body(rank, world):
    parallel = init_parallelism(world, "cpu")
    args = _args(model="tiny-qwen3", layers=None, dtype="fp32", fuse_elementwise=False)
    policy, config = bench._build_policy(args, parallel.device, parallel)
    groups = synthetic_rollouts(2, 3, 12, (3, 9), config.vocab_size, seed=5)
    # The whole batch for one SP group: counted once, not once per rank.
    assert bench._global_counts(groups, parallel) == work.batch_counts(groups)
    advantages = bench._advantages(groups, parallel.device)
    whole = work.packed_micro_batches(groups, 3)  # two micro-batches: gradients accumulate over both
    shards = [(bench._rank_input(batch, parallel.sp_group), ids) for batch, ids in whole]
    logprobs, gradients = _step_with_gradients(policy, shards, advantages)
    # The same weights (the benchmark's seed), unsharded, on whole micro-batches in one process.
    reference = PackedPolicy(build_model("tiny-qwen3", seed=args.seed)).train()
    expected_logprobs, expected_gradients = _step_with_gradients(reference, whole, advantages)
    assert logprobs.keys() == expected_logprobs.keys()
    for key, value in expected_logprobs.items():
        torch.testing.assert_close(logprobs[key], value, rtol=1e-5, atol=1e-5)
    # FSDP2's mean over the SP ranks is the whole micro-batches' gradient: no extra loss scaling.
    assert gradients.keys() == expected_gradients.keys() == dict(reference.named_parameters()).keys()
    for name, value in expected_gradients.items():
        torch.testing.assert_close(gradients[name], value, rtol=1e-4, atol=1e-5, msg=name)


def test_sequence_parallel_step_equals_the_unsharded_step(tmp_path):
    run_ranks(2, tmp_path, _sequence_parallel_step_body)


def test_sequence_parallelism_is_accepted_for_every_method(capsys):
    args = bench._parse(["--sp", "2"])
    assert args.sp == 2 and args.methods == list(bench.DEFAULT_METHODS)
    assert bench._parse(["--sp", "2", "--methods", *bench.METHODS]).methods == list(bench.METHODS)
    with pytest.raises(SystemExit):
        bench._parse(["--sp", "0"])
    assert "--sp: must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(("shapes", "dynamic"), [("auto", None), ("dynamic", True)])
def test_flex_is_compiled_with_the_requested_shapes(shapes, dynamic, monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda function, **kwargs: compiled.append(kwargs) or function)
    # Both module globals are restored after the test; the compiled function stands for a previous run's.
    monkeypatch.setattr(step_attention, "_flex_dynamic", None)
    monkeypatch.setattr(step_attention, "_compiled_flex_attention", object())
    step_attention.set_flex_shapes(shapes)
    assert step_attention._compiled_flex_attention is None  # the next call compiles afresh
    lm = build_model("tiny-qwen3")
    groups = rollouts()
    batch = dualkv.pack([g.prompt for g in groups], [g.responses for g in groups])
    monkeypatch.setattr("torch.nn.attention.flex_attention.flex_attention", _dense_flex_attention)
    _model_outputs(lm, batch, step_attention.FLEX_PACKED)
    assert compiled == [{"dynamic": dynamic}]


def test_flex_shapes_option_and_its_errors(capsys):
    assert bench._parse([]).flex_shapes == "auto"
    assert bench._parse(["--flex-shapes", "dynamic"]).flex_shapes == "dynamic"
    with pytest.raises(SystemExit):
        bench._parse(["--flex-shapes", "static"])
    assert "--flex-shapes: invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="shapes: 'auto' or 'dynamic', got 'static'"):
        step_attention.set_flex_shapes("static")


def _tiny_policy():
    return PackedPolicy(build_model("tiny-qwen3")).train()


def _args(**overrides):
    settings = {"max_fit": 4, "response_length": [3, 9], "seed": 0, "warmup": 1, "warmup_micro_batches": None,
                "repeats": 2, **overrides}
    return argparse.Namespace(**settings)


@pytest.mark.parametrize(("groups", "largest", "probes_at_4"), [(2, 2, 2), (1, 4, 1)])
def test_fit_probe_runs_the_step_on_two_micro_batches_with_gradients_alive(groups, largest, probes_at_4):
    # Stand-in for the H100's memory: a micro-batch of 4 responses fits on its own, not beside the
    # gradients a first micro-batch left (the timed step's gradient accumulation). The probe must
    # see that wherever the timed step has two micro-batches or more (2 groups of 4 at size 4); a
    # step whose batch is one micro-batch at that size (1 group of 4) accumulates nothing.
    policy = _tiny_policy()
    calls = []

    def record(module, inputs):
        batch = inputs[0]
        alive = any(p.grad is not None for p in module.parameters())
        calls.append((batch.num_responses, torch.is_grad_enabled(), alive))
        if torch.is_grad_enabled() and alive and batch.num_responses >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    policy.register_forward_pre_hook(record)
    step_groups = synthetic_rollouts(groups, 4, 5, (3, 9), policy.lm.config.vocab_size, seed=3)
    found = bench._largest_fit(policy, work.packed_micro_batches, step_groups, _args(), torch.device("cpu"), 1)
    assert found == largest
    # Sizes 1 and 2: old log-probs of both micro-batches first, then forward + backward of each, the
    # second's forward with the first one's gradients alive; gradients dropped after each step.
    for size in (1, 2):
        expected = [(size, False, False)] * 2 + [(size, True, False), (size, True, True)]
        assert calls[:4] == expected
        del calls[:4]
    if probes_at_4 == 2:  # the OOM on the second micro-batch; gradients dropped by the recovery
        assert calls == [(4, False, False)] * 2 + [(4, True, False), (4, True, True)]
    else:
        assert calls == [(4, False, False), (4, True, False)]
    assert all(p.grad is None for p in policy.parameters())


@pytest.mark.parametrize(
    ("start", "max_fit", "limit", "probed", "largest"),
    [(8, 64, 40, [8, 16, 32, 64], 32),  # doubling from the start until a size does not fit
     (12, 64, 64, [8, 16, 32, 64], 64),  # the start rounded down to a power of two; --max-fit is tried
     (8, 64, 3, [8, 4, 2], 2),  # halving until a size fits
     (8, 64, 0, [8, 4, 2, 1], 0),  # not even one response
     (32, 4, 64, [4], 4)],  # the start capped at --max-fit
)
def test_fit_search_starts_at_the_timed_micro_batch(start, max_fit, limit, probed, largest, monkeypatch):
    # Memory grows with the size: the search finds the largest fitting power of two up to --max-fit,
    # as doubling from 1 does, without probing the sizes below the start that fits.
    sizes = []

    def step(policy, micro_batches, advantages):
        sizes.append(max(batch.num_responses for batch, _ in micro_batches))
        if sizes[-1] > limit:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(bench, "_step", step)
    recovered = []
    monkeypatch.setattr(bench, "_recover", lambda policy, device: recovered.append(sizes[-1]))
    groups = synthetic_rollouts(1, 8, 5, (3, 9), 128, seed=3)
    found = bench._largest_fit(_tiny_policy(), work.ncopy_micro_batches, groups, _args(max_fit=max_fit),
                               torch.device("cpu"), start)
    assert (found, sizes) == (largest, probed)
    assert recovered == [size for size in probed if size > limit]  # after every size that ran out of memory


def _run_with_memory_limit(monkeypatch, limit, world=1, micro_batch=8):
    """run_step_bench._run_method with a _step that runs out of memory on micro-batches of more than
    `limit` responses; the fit search (stubbed) accepts 8. Returns the result and the sizes stepped."""
    stepped = []

    def step(policy, micro_batches, advantages):
        stepped.append(max(batch.num_responses for batch, _ in micro_batches))
        if stepped[-1] > limit:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return {rid: torch.zeros(1) for _, ids in micro_batches for rid in ids}

    monkeypatch.setattr(bench, "_step", step)
    monkeypatch.setattr(bench, "_largest_fit", lambda *args: 8)
    monkeypatch.setattr(bench, "_max_over_ranks", lambda value, device: value)
    groups = synthetic_rollouts(1, 8, 5, (3, 9), 128, seed=3)
    result = bench._run_method("dualkv", _tiny_policy(), groups, micro_batch, _args(), torch.device("cpu"), world)
    return result, stepped


def test_recurrent_bench_reports_a_stream_out_of_memory_and_goes_on(tmp_path, monkeypatch, capsys):
    import run_recurrent_bench as recurrent_bench

    timed = []

    def time_layer(plan, args, dtype, device):
        timed.append(plan.num_tokens)
        if plan.num_tokens > 20:  # the N-copy streams of N = 3 and N = 4 "do not fit"
            raise torch.OutOfMemoryError("simulated")
        return {"ms": float(plan.num_tokens), "ms_all": [float(plan.num_tokens)], "peak_memory_gib": 0.0}

    monkeypatch.setattr(recurrent_bench, "_time_layer", time_layer)
    report = recurrent_bench.main(
        ["--device", "cpu", "--dtype", "fp32", "--heads", "2", "--key-dim", "8", "--value-dim", "8",
         "--prompt-lengths", "8", "--responses", "1", "3", "4", "--response-length", "2", "2", "--out", str(tmp_path)]
    )
    entries = report["entries"]
    assert len(timed) == 6  # every stream of every (P, N) was tried
    assert [e["ncopy"]["status"] for e in entries] == ["ok", "out of memory", "out of memory"]
    assert all(e["packed"]["status"] == "ok" for e in entries)
    assert entries[0]["speedup"] == pytest.approx(1.0) and entries[1]["speedup"] is None
    assert json.loads((tmp_path / "recurrent_bench.json").read_text())["entries"][2]["speedup"] is None
    printed = capsys.readouterr().out.splitlines()
    assert "out of memory" in printed[1] and "speed-up     -" in printed[1]


def test_recurrent_bench_runs_the_ncopy_rows_as_micro_batches(tmp_path, monkeypatch):
    import run_recurrent_bench as recurrent_bench

    streams = []

    def time_layer(plan, args, dtype, device):
        streams.append(plan.num_tokens)
        return {"ms": float(plan.num_tokens), "ms_all": [float(plan.num_tokens)], "peak_memory_gib": plan.num_tokens}

    monkeypatch.setattr(recurrent_bench, "_time_layer", time_layer)
    options = ["--device", "cpu", "--dtype", "fp32", "--heads", "2", "--key-dim", "8", "--value-dim", "8",
               "--prompt-lengths", "8", "--responses", "5", "--response-length", "2", "6", "--out", str(tmp_path)]
    (whole,) = recurrent_bench.main(options)["entries"]
    assert whole["ncopy"]["calls"] == 1 and streams[-1] == whole["ncopy_tokens"]
    streams.clear()
    (split,) = recurrent_bench.main([*options, "--ncopy-micro-batch", "2"])["entries"]
    # Rows [0, 2), [2, 4), [4, 5): 8-token prompts and their responses, each row once.
    assert split["ncopy"]["calls"] == 3 and split["ncopy_tokens"] == whole["ncopy_tokens"]
    assert streams[0] == split["packed_tokens"] and sum(streams[1:]) == split["ncopy_tokens"]
    response_tokens = split["packed_tokens"] - 8
    assert sum(streams[1:]) - 8 * 5 == response_tokens
    for tokens, rows in zip(streams[1:], (2, 2, 1)):  # responses of 2-6 tokens after each prompt
        assert 10 * rows <= tokens <= 14 * rows
    assert split["ncopy"]["ms"] == pytest.approx(sum(streams[1:]))
    assert split["ncopy"]["peak_memory_gib"] == max(streams[1:])
    assert split["speedup"] == pytest.approx(split["ncopy"]["ms"] / split["packed"]["ms"])


def test_timed_step_out_of_memory_retries_at_half_the_size(monkeypatch):
    result, stepped = _run_with_memory_limit(monkeypatch, limit=2)
    assert result["status"] == "ok" and result["micro_batch"] == 2 and result["micro_steps"] == 4
    assert result["oom_micro_batches"] == [8, 4] and result["largest_micro_batch"] == 8
    assert stepped == [8, 4, 2, 2, 2]  # one failed warmup at 8 and 4, then warmup + 2 repeats at 2
    assert len(result["step_s_all"]) == 2 and result["step_s"] > 0
    # The table renders the result (its status; the sizes that failed are in the JSON only).
    line = step_report.format_entry({"P": 5, "N": 8, "methods": {"dualkv": result}})
    assert line.split()[-1] == "ok"

    result, _ = _run_with_memory_limit(monkeypatch, limit=8)
    assert result["status"] == "ok" and result["micro_batch"] == 8 and result["oom_micro_batches"] == []


@pytest.mark.parametrize(("warmup_micro_batches", "warmed"), [(None, 4), (1, 1), (9, 4)])
def test_warmup_steps_run_the_first_micro_batches_only_when_asked(warmup_micro_batches, warmed, monkeypatch):
    stepped = []
    monkeypatch.setattr(bench, "_step", lambda policy, micro_batches, advantages: stepped.append(len(micro_batches)))
    args = _args(warmup=2, warmup_micro_batches=warmup_micro_batches)
    times, _ = bench._timed_steps(None, ["mb"] * 4, {}, args, torch.device("cpu"))
    assert stepped == [warmed, warmed, 4, 4] and len(times) == 2
    assert bench._parse(["--warmup-micro-batches", "2"]).warmup_micro_batches == 2


def test_timed_step_out_of_memory_at_one_response_or_on_several_ranks(monkeypatch):
    result, stepped = _run_with_memory_limit(monkeypatch, limit=0)
    assert result["status"] == "OOM at a micro-batch of 1 response"
    assert result["oom_micro_batches"] == [8, 4, 2, 1] == stepped and "micro_batch" not in result
    # With other ranks in collectives, an out-of-memory error stops the run instead of retrying.
    with pytest.raises(torch.OutOfMemoryError):
        _run_with_memory_limit(monkeypatch, limit=2, world=2)


@pytest.mark.parametrize(("world", "resets"), [(1, ["search", "reset"]), (2, [])])
def test_compile_caches_are_cleared_after_the_fit_search_only(world, resets, monkeypatch):
    # The search's several stream lengths must not decide which FlexAttention the timed step runs.
    events = []
    monkeypatch.setattr(bench, "_largest_fit", lambda *args: events.append("search") or 8)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: events.append("reset"))
    monkeypatch.setattr(bench, "_timed_steps", lambda *args: (events.append("timed"), ([1.0], {}))[1])
    monkeypatch.setattr(bench, "_max_over_ranks", lambda value, device: value)
    groups = synthetic_rollouts(1, 8, 5, (3, 9), 128, seed=3)
    bench._run_method("dualkv", _tiny_policy(), groups, 8, _args(), torch.device("cpu"), world)
    assert events == resets + ["timed"]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 16])
def test_micro_batches_hold_every_response_once_within_the_size(size):
    groups = rollouts()
    expected = sorted((g, i) for g, group in enumerate(groups) for i in range(len(group.responses)))
    for split in (work.packed_micro_batches, work.ncopy_micro_batches):
        batches = split(groups, size)
        assert sorted(rid for _, ids in batches for rid in ids) == expected
        for batch, ids in batches:
            assert batch.num_responses == len(ids) <= size
            tokens = [batch.input_ids[0, rows[mask]].tolist() for rows, mask in zip(batch.token_rows, batch.response_mask)]
            assert tokens == [list(groups[g].responses[i]) for g, i in ids]
    # N-copy rows: one response per layout group, so every row restarts its positions at 0.
    for batch, _ in work.ncopy_micro_batches(groups, size):
        assert all(len(lengths) == 1 for lengths in batch.layout.response_lengths)


def test_work_counts_match_the_layouts():
    groups = rollouts()
    counts = work.batch_counts(groups)
    packed = dualkv.pack([g.prompt for g in groups], [g.responses for g in groups])
    assert counts["packed_tokens"] == packed.num_tokens
    assert counts["ncopy_tokens"] == sum(b.num_tokens for b, _ in work.ncopy_micro_batches(groups, 1))
    segment, group = packed.layout.segment_ids, packed.layout.group_ids
    in_prompt = torch.isin(segment, packed.layout.cu_groups[:-1].long())
    q, k = torch.meshgrid(torch.arange(packed.num_tokens), torch.arange(packed.num_tokens), indexing="ij")
    visible = (k <= q) & (group[q] == group[k]) & (in_prompt[k] | (segment[q] == segment[k]))
    assert counts["packed_pairs"] == int(visible.sum())
    assert counts["ncopy_pairs"] == sum((len(g.prompt) + len(r)) * (len(g.prompt) + len(r) + 1) // 2
                                        for g in groups for r in g.responses)


def _model_outputs(lm, batch, attention):
    lm.set_attn_implementation(attention)
    with torch.no_grad():
        return lm.model(input_ids=batch.input_ids, position_ids=batch.position_ids, dualkv_layout=batch.layout,
                        use_cache=False).last_hidden_state


def _per_row_causal_varlen(q, k, v, cu_q, cu_k, max_q, max_k, *, scale=None, window_size=(-1, -1)):
    """Stand-in for PyTorch's FlashAttention varlen kernel (GPU only): causal SDPA on each row."""
    assert window_size == (-1, 0) and torch.equal(cu_q, cu_k) and max_q == int(cu_q.diff().max())
    rows = [torch.nn.functional.scaled_dot_product_attention(
        q[s:e].transpose(0, 1), k[s:e].transpose(0, 1), v[s:e].transpose(0, 1), is_causal=True, scale=scale,
        enable_gqa=True).transpose(0, 1) for s, e in zip(cu_q[:-1].tolist(), cu_q[1:].tolist())]
    return torch.cat(rows)


def _per_row_causal_fa4(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal):
    """Stand-in for FlashAttention-4's varlen function (GPU only): (out, lse) of causal SDPA per row."""
    assert causal and max_seqlen_q == max_seqlen_k
    out = _per_row_causal_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                 scale=softmax_scale, window_size=(-1, 0))
    return out, None


def _stand_in_varlen(monkeypatch):
    monkeypatch.setattr(torch.nn.attention.varlen, "varlen_attn", _per_row_causal_varlen)


def _stand_in_fa4(monkeypatch):
    cute = types.ModuleType("flash_attn.cute")
    cute.flash_attn_varlen_func = _per_row_causal_fa4
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))
    monkeypatch.setitem(sys.modules, "flash_attn.cute", cute)


@pytest.mark.parametrize(("method", "stand_in"), [("flash_ncopy", _stand_in_varlen), ("fa4_ncopy", _stand_in_fa4)])
@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-qwen3.5"])
def test_ncopy_attention_feeds_the_kernel_one_causal_row_each(method, stand_in, name, monkeypatch):
    # The kernels need a GPU (FA4 also flash-attn-4); a per-row causal SDPA stands in for each, so
    # this checks the row offsets and tensor layouts the benchmark hands it against dualkv on the
    # same stream. On tiny Qwen3.5 the Gated DeltaNet layers run the N-copy rows as one wave.
    stand_in(monkeypatch)
    attention = {"flash_ncopy": step_attention.FLASH_NCOPY, "fa4_ncopy": step_attention.FA4_NCOPY}[method]
    lm = build_model(name)
    (batch, _), *_ = work.ncopy_micro_batches(rollouts(), 16)
    expected = _model_outputs(lm, batch, "dualkv")
    assert torch.allclose(_model_outputs(lm, batch, attention), expected, atol=1e-5, rtol=1e-5)
    packed = dualkv.pack([[1, 2]], [[[3], [4]]])
    with pytest.raises(ValueError, match=f"dualkv_layout: the {method} method needs the N-copy layout"):
        _model_outputs(lm, packed, attention)


def test_fa4_ncopy_is_skipped_with_the_reason_where_flash_attn_4_is_missing(monkeypatch):
    _stand_in_fa4(monkeypatch)
    assert step_attention.fa4_unavailable() is None
    monkeypatch.setitem(sys.modules, "flash_attn", None)
    monkeypatch.setitem(sys.modules, "flash_attn.cute", None)
    assert step_attention.fa4_unavailable().startswith("flash_attn.cute (flash-attn-4) cannot be imported")
    assert bench._skipped(["fa4_ncopy"], torch.device("cpu")) == {"fa4_ncopy": "FlashAttention-4 runs on CUDA only"}


def test_flex_block_mask_equals_dualkv_on_the_packed_stream():
    # FlexAttention's forward runs on a CPU (compiled, ~30 s); its backward does not.
    lm = build_model("tiny-qwen3")
    groups = rollouts()
    batch = dualkv.pack([g.prompt for g in groups], [g.responses for g in groups])
    expected = _model_outputs(lm, batch, "dualkv")
    assert torch.allclose(_model_outputs(lm, batch, step_attention.FLEX_PACKED), expected, atol=1e-5, rtol=1e-5)


def _dense_flex_attention(query, key, value, *, block_mask, scale, enable_gqa, kernel_options=None):
    """Stand-in for compiled flex_attention (no backward on a CPU): SDPA with block_mask's mask_mod
    evaluated on every (query, key) pair of the stream. kernel_options: None (the Triton backend) or
    the FA4 backend's."""
    from torch.nn.attention.flex_attention import create_mask

    assert kernel_options in (None, {"BACKEND": "FLASH"})
    assert enable_gqa and block_mask.shape[-2:] == (query.shape[2], key.shape[2])
    mask = create_mask(block_mask.mask_mod, None, None, query.shape[2], key.shape[2], device=query.device)
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scale, enable_gqa=enable_gqa
    )


def _hidden_and_gradients(lm, inputs, weights):
    """The final hidden states of `inputs` (model keyword arguments) and the parameter gradients of
    their first rows weighted by `weights` (a loss touching every real row; a shard's pad rows last)."""
    lm.zero_grad(set_to_none=True)
    hidden = lm.model(**inputs).last_hidden_state[0]
    (hidden[: weights.shape[0]] * weights).sum().backward()
    return hidden.detach(), {name: p.grad.clone() for name, p in lm.named_parameters() if p.grad is not None}


def _baseline_under_sequence_parallelism_body(rank, world, method):
    """`method`'s attention on this rank's shard of a micro-batch equals, over the ranks, the
    unsharded reference on the whole micro-batch: hidden states row by row and the summed gradients
    (each rank's backward covers its rows' loss, through the other ranks' keys too)."""
    kernel_calls = []  # (tokens, query heads) of each stand-in call: the kernel must see them

    def varlen(q, *args, **kwargs):
        kernel_calls.append((q.shape[0], q.shape[1]))
        return _per_row_causal_varlen(q, *args, **kwargs)

    def flex(query, *args, **kwargs):
        kernel_calls.append((query.shape[2], query.shape[1]))
        return _dense_flex_attention(query, *args, **kwargs)

    torch.nn.attention.varlen.varlen_attn = varlen  # in this spawned process only
    step_attention._compiled_flex_attention = flex
    lm = build_model("tiny-qwen3")  # the same weights on every rank
    if method == "flash_ncopy":  # against the single-process baseline itself
        (batch, _), *_ = work.ncopy_micro_batches(rollouts(), 16)
        attention, reference = step_attention.FLASH_NCOPY, step_attention.FLASH_NCOPY
    else:  # against dualkv: the stand-in's mask is checked too
        batch = dualkv.pack([g.prompt for g in rollouts()], [g.responses for g in rollouts()])
        attention = {"flex_packed": step_attention.FLEX_PACKED, "flex_fa4": step_attention.FLEX_FA4}[method]
        reference = "dualkv"
    # A token-mean-sized loss (gradients of order 1) for fp32 tolerances of order 1e-5.
    weights = torch.randn(batch.num_tokens, lm.config.hidden_size, generator=torch.Generator().manual_seed(7))
    weights /= batch.num_tokens
    lm.set_attn_implementation(reference)
    whole = dict(input_ids=batch.input_ids, position_ids=batch.position_ids, dualkv_layout=batch.layout,
                 use_cache=False)
    expected_hidden, expected_gradients = _hidden_and_gradients(lm, whole, weights)
    lm.set_attn_implementation(attention)
    shard = shard_sequence(batch)
    rows = slice(shard.first_row, min(shard.first_row + shard.local_tokens, batch.num_tokens))
    kernel_calls.clear()
    hidden, gradients = _hidden_and_gradients(lm, shard.model_inputs(), weights[rows])
    # The baseline's kernel ran (not dualkv's op), once per layer, on the whole stream, this rank's heads.
    heads = lm.config.num_attention_heads
    assert kernel_calls == [(batch.num_tokens, heads // world)] * lm.config.num_hidden_layers
    torch.testing.assert_close(hidden[: rows.stop - rows.start], expected_hidden[rows], rtol=1e-5, atol=1e-5)
    assert gradients.keys() == expected_gradients.keys()
    for name, gradient in gradients.items():
        torch.distributed.all_reduce(gradient)
        torch.testing.assert_close(gradient, expected_gradients[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("method", ["flash_ncopy", "flex_packed", "flex_fa4"])
def test_baseline_under_sequence_parallelism_equals_the_unsharded_run(method, tmp_path):
    # The GPU kernels have CPU stand-ins (per-row causal SDPA; SDPA on the block mask's mask_mod), so
    # this checks what the baselines add around them under SP: Ulysses' exchanges and head split,
    # the caches keyed by the global layout, the tensor layouts.
    run_ranks(2, tmp_path, _baseline_under_sequence_parallelism_body, method)
