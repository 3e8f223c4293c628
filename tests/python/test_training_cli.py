"""`python -m dualkv.training` end to end on a CPU (one process), the rollout file reader, and the
packed-versus-N-copy comparison command."""

import json
import math
import subprocess
import sys

import pytest
from training_support import rollouts

from dualkv.training import compare, load_jsonl


def _write(path, groups):
    path.write_text(
        "".join(
            json.dumps({"prompt": list(g.prompt), "responses": [list(r) for r in g.responses], "rewards": list(g.rewards)})
            + "\n"
            for g in groups
        )
    )


def test_command_line_runs_policy_updates_and_logs_one_json_line_per_step(tmp_path):
    groups = rollouts()
    _write(tmp_path / "rollouts.jsonl", groups)
    log = tmp_path / "steps.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "dualkv.training", "--rollouts", str(tmp_path / "rollouts.jsonl"), "--loss", "dapo",
         "--groups-per-step", "3", "--max-tokens", "20", "--device", "cpu", "--metrics-log", str(log)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "2/2" in result.stderr  # the progress bar reached the last of ceil(4 / 3) steps
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1]
    first = records[0]
    assert first["ncopy_tokens"] == sum(len(g.prompt) * len(g.responses) + sum(map(len, g.responses)) for g in groups[:3])
    assert first["micro_steps"] > 1 and first["split_groups"] == [0]
    for record in records:
        assert math.isfinite(record["loss"]) and record["grad_norm"] > 0 and not record["skipped"]
        assert record["kl"] == 0.0  # DAPO: no KL term, no reference policy


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"prompt": [1], "responses": [[3]], "rewards": [1.0]}\n{"prompt": [1], "responses": [[3]]}\n',
         r"bad.jsonl:2: missing field 'rewards'"),
        ('{"prompt": [1], "responses": [[3], []], "rewards": [1.0, 0.0]}\n',
         r"bad.jsonl:1: responses\[1\]: needs at least one token"),
        ('{"prompt": [1], "responses": [[3, -1]], "rewards": [1.0]}\n',
         r"bad.jsonl:1: responses\[0\]: token ids must be non-negative integers"),
        ('{"prompt": [1], "responses": [[3]], "rewards": [1.0, 2.0]}\n',
         r"bad.jsonl:1: rewards: expected one per response \(1\), got 2"),
        ("\n", "no rollout group"),
    ],
)
def test_rollout_file_errors_name_the_line_and_field(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_jsonl(path)


def test_compare_command_shows_equal_packed_and_ncopy_updates(capsys):
    result = compare.main(["--groups", "2", "--responses", "3", "--prompt-length", "24", "--response-length", "3", "9",
                           "--max-tokens", "40"])
    assert result["ncopy_tokens"] > result["packed_tokens"]
    assert result["packed_loss"] == pytest.approx(result["ncopy_loss"], rel=1e-4)
    assert result["packed_grad_norm"] == pytest.approx(result["ncopy_grad_norm"], rel=1e-4)
    assert result["max_gradient_error"] <= 1e-3
    assert "fewer" in capsys.readouterr().out
