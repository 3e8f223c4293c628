"""scripts/model_sweep.py on a handful of representative architectures (the whole sweep takes
minutes and is run by hand; docs/models.md holds its latest result): each is classified as the
whole sweep classified it, and none differs silently from its N-copy batch."""

import subprocess
import sys

import pytest
from sweep_support import model_sweep

REPRESENTATIVE = {
    "qwen3": "equal",
    "qwen3_moe": "equal",
    "mistral": "equal",  # a sliding window longer than every path of the batch
    "deepseek_v3": "equal",  # multi-head latent attention
    "gpt2": "equal",  # learned absolute positions
    "bloom": "refused",  # its own attention, which ignores the layout
    "mamba": "refused",  # a recurrent layer
    "falcon": "refused",  # attention classes picked from a table, at construction
    "stablelm": "refused",  # its decoder layers drop the layout
    "roberta": "refused",  # positions counted from its padding id
    "bart": "skipped",  # encoder-decoder
}


@pytest.mark.parametrize("model_type, status", list(REPRESENTATIVE.items()))
def test_representative_architectures_are_classified(model_type, status):
    outcome = model_sweep.sweep_one(model_type)
    assert outcome.status == status, outcome.detail
    assert outcome.detail if status != "equal" else outcome.difference <= model_sweep.TOLERANCE


def test_the_command_writes_its_table_and_fails_on_nothing(tmp_path, capsys):
    table = tmp_path / "models.md"
    assert model_sweep.main(["--only", "qwen3", "mamba", "--markdown", str(table)]) == 0
    assert "counts: equal 1, refused 1, skipped 0, DIFFERENT 0, error 0" in capsys.readouterr().out
    assert "| qwen3 | equal |" in table.read_text() and "| mamba | refused | MambaForCausalLM:" in table.read_text()


def test_the_script_has_help():
    result = subprocess.run([sys.executable, "scripts/model_sweep.py", "--help"], capture_output=True, text=True,
                            timeout=120, cwd=model_sweep.__file__.rsplit("/scripts/", 1)[0])
    assert result.returncode == 0 and "DIFFERENT" in result.stdout
