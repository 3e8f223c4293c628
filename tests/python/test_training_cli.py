"""`python -m dualkv.training` end to end on a CPU (one process) from JSONL and parquet rollout
files, and the packed-versus-N-copy comparison command. The readers' checks: test_rollout_files.py."""

import json
import math
import subprocess
import sys

import pytest
from training_support import records, rollouts, write_rollouts

from dualkv.training import compare


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_command_line_runs_policy_updates_and_logs_one_json_line_per_step(tmp_path, suffix):
    groups = rollouts()
    write_rollouts(tmp_path / f"rollouts{suffix}", records(groups))
    log = tmp_path / "steps.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "dualkv.training", "--rollouts", str(tmp_path / f"rollouts{suffix}"), "--loss", "dapo",
         "--groups-per-step", "3", "--max-tokens", "20", "--device", "cpu", "--metrics-log", str(log)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "2/2" in result.stderr  # the progress bar reached the last of ceil(4 / 3) steps
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in steps] == [0, 1]
    first = steps[0]
    assert first["ncopy_tokens"] == sum(len(g.prompt) * len(g.responses) + sum(map(len, g.responses)) for g in groups[:3])
    assert first["micro_steps"] > 1 and first["split_groups"] == [0]
    for record in steps:
        assert math.isfinite(record["loss"]) and record["grad_norm"] > 0 and not record["skipped"]
        assert record["kl"] == 0.0  # DAPO: no KL term, no reference policy


def test_command_line_trains_a_hybrid_model(tmp_path):
    """Qwen3.5's layer pattern (Gated DeltaNet, gated attention), a group split over micro-batches."""
    write_rollouts(tmp_path / "rollouts.jsonl", records(rollouts()))
    log = tmp_path / "steps.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "dualkv.training", "--model", "tiny-qwen3.5", "--rollouts",
         str(tmp_path / "rollouts.jsonl"), "--groups-per-step", "4", "--max-tokens", "20", "--device", "cpu",
         "--metrics-log", str(log)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (step,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert step["split_groups"] == [0] and math.isfinite(step["loss"]) and step["grad_norm"] > 0
    assert not step["skipped"]


def test_fused_elementwise_layers_give_the_same_updates(tmp_path):
    """GRPO (so a frozen reference copy of the fused model runs too), with and without
    --fuse-elementwise: the same loss, KL and gradient norm at every step."""
    write_rollouts(tmp_path / "rollouts.jsonl", records(rollouts()))
    logged = []
    for flags in ([], ["--fuse-elementwise"]):
        log = tmp_path / f"steps{len(flags)}.jsonl"
        result = subprocess.run(
            [sys.executable, "-m", "dualkv.training", "--rollouts", str(tmp_path / "rollouts.jsonl"), "--dtype", "fp32",
             "--groups-per-step", "2", "--max-tokens", "20", "--device", "cpu", "--metrics-log", str(log), *flags],
            capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr
        logged.append([json.loads(line) for line in log.read_text().splitlines()])
    eager, fused = logged
    assert len(eager) == len(fused) == 2
    for a, b in zip(eager, fused):
        for key in ("loss", "kl", "grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-7), key


@pytest.mark.parametrize("model", ["tiny-qwen3", "tiny-qwen3.5"])
def test_fused_elementwise_layers_train_in_bf16(tmp_path, model):
    """The default bf16 compute with a frozen reference copy calls each fused function in more
    variants (dtypes, grad modes, ranks, a strided query) than Dynamo's default recompile limit
    allows; with a compiled function at its limit, the first update failed."""
    write_rollouts(tmp_path / "rollouts.jsonl", records(rollouts()))
    log = tmp_path / "steps.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "dualkv.training", "--model", model, "--rollouts", str(tmp_path / "rollouts.jsonl"),
         "--fuse-elementwise", "--groups-per-step", "4", "--max-tokens", "40", "--device", "cpu",
         "--metrics-log", str(log)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (step,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert math.isfinite(step["loss"]) and step["grad_norm"] > 0 and not step["skipped"]


def test_command_line_names_a_rollout_file_of_unknown_format(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "dualkv.training", "--rollouts", str(tmp_path / "rollouts.csv"), "--device", "cpu"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 2 and "--rollouts: expected a file ending in one of" in result.stderr


def _run(*flags):
    return subprocess.run([sys.executable, "-m", "dualkv.training", "--device", "cpu", *flags],
                          capture_output=True, text=True, timeout=300)


def test_command_line_exits_nonzero_when_steps_were_skipped():
    """A learning rate of 1e30 overflows the weights in the first step: the later steps' gradients
    are not finite, they are skipped, and the run must not report success."""
    result = _run("--groups", "2", "--responses", "2", "--prompt-length", "8", "--response-length", "2", "4",
                  "--epochs", "3", "--lr", "1e30", "--dtype", "fp32", "--loss", "dapo")
    assert result.returncode == 1, result.stderr
    assert "2 of 3 steps were skipped because their loss or gradient norm was not finite (steps [1, 2])" in (
        result.stderr
    )
    steps = [json.loads(line) for line in result.stdout.splitlines()]
    assert [s["skipped"] for s in steps] == [False, True, True]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--kl-coef", "nan"], "--kl-coef: must be finite and >= 0, got nan"),
        (["--kl-coef", "-0.01"], "--kl-coef: must be finite and >= 0, got -0.01"),
        (["--temperature", "0"], "--temperature: must be finite and > 0, got 0.0"),
        (["--lr", "inf"], "--lr: must be finite and >= 0, got inf"),
        (["--max-grad-norm", "nan"], "--max-grad-norm: must be > 0, got nan"),
    ],
)
def test_command_line_refuses_bad_update_settings_naming_the_flag(flags, message, capsys):
    from dualkv.training.__main__ import main

    with pytest.raises(SystemExit) as exit_status:
        main(flags)
    assert exit_status.value.code == 2
    assert message in capsys.readouterr().err


def test_command_line_names_the_file_line_and_vocabulary_of_an_out_of_range_token_id(tmp_path):
    good = {"prompt": [1, 2], "responses": [[3], [4]], "rewards": [1.0, 0.0]}
    bad = {"prompt": [1, 2], "responses": [[3, 600]], "rewards": [1.0]}
    write_rollouts(tmp_path / "rollouts.jsonl", [good, bad])
    result = _run("--rollouts", str(tmp_path / "rollouts.jsonl"))
    assert result.returncode != 0
    assert ("rollouts.jsonl:2: responses[0][1]: token id 600 is outside the model's vocabulary of 512 ids (0..511)"
            in result.stderr)


def test_command_line_refuses_a_model_that_mixes_tokens_outside_the_layout(tmp_path):
    from sweep_support import model_sweep
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_config(model_sweep.tiny_config("mamba")).save_pretrained(tmp_path / "tiny-mamba")
    result = _run("--model", str(tmp_path / "tiny-mamba"), "--groups", "1", "--responses", "2", "--prompt-length", "4",
                  "--response-length", "2", "3")
    assert result.returncode != 0
    assert "UnsupportedModelError: MambaForCausalLM: dualkv cannot run this model exactly" in result.stderr


def test_compare_command_shows_equal_packed_and_ncopy_updates(capsys):
    result = compare.main(["--groups", "2", "--responses", "3", "--prompt-length", "24", "--response-length", "3", "9",
                           "--max-tokens", "40"])
    assert result["ncopy_tokens"] > result["packed_tokens"]
    assert result["packed_loss"] == pytest.approx(result["ncopy_loss"], rel=1e-4)
    assert result["packed_grad_norm"] == pytest.approx(result["ncopy_grad_norm"], rel=1e-4)
    assert result["max_gradient_error"] <= 1e-3
    assert "fewer" in capsys.readouterr().out


@pytest.mark.skipif(__import__("dualkv").cuda_compiled(), reason="checks the CPU-only build's refusal")
def test_command_line_refuses_cuda_without_dualkvs_cuda_kernels(tmp_path):
    groups = rollouts()
    write_rollouts(tmp_path / "rollouts.jsonl", records(groups))
    result = subprocess.run(
        [sys.executable, "-m", "dualkv.training", "--rollouts", str(tmp_path / "rollouts.jsonl"), "--device", "cuda"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert "requested (--device): cuda needs dualkv built with its CUDA kernels" in result.stderr
