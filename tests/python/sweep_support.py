"""scripts/model_sweep.py as a module (its tiny configurations serve the model-check tests)."""

import importlib.util
import pathlib
import sys

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "model_sweep.py"
_spec = importlib.util.spec_from_file_location("model_sweep", _PATH)
model_sweep = importlib.util.module_from_spec(_spec)
sys.modules["model_sweep"] = model_sweep  # dataclasses look their module up while the file runs
_spec.loader.exec_module(model_sweep)
