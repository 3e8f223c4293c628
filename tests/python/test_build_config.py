"""The pip build's configuration (pyproject.toml, python/cmake): which CUDA architectures it
compiles, and that a machine with nvcc and a CUDA torch but no GPU configures it as written."""

import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = pathlib.Path(__file__).resolve().parents[2]
PICK_ARCHITECTURES = ROOT / "python" / "cmake" / "cuda_architectures.cmake"


def _fake_nvidia_smi(tmp_path, output, exit_code=0):
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{output}'\nexit {exit_code}\n")
    script.chmod(0o755)
    return script


def _picked_architectures(tmp_path, nvidia_smi):
    script = tmp_path / "pick.cmake"
    script.write_text(
        f'include("{PICK_ARCHITECTURES}")\n'
        "dualkv_pick_cuda_architectures(architectures)\n"
        'message(NOTICE "${architectures}")\n'
    )
    result = subprocess.run(
        ["cmake", f"-DDUALKV_NVIDIA_SMI={nvidia_smi}", "-P", str(script)],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stderr.strip()


@pytest.mark.parametrize(
    "output, exit_code, expected",
    [
        ("", 9, "80;86;90"),  # nvidia-smi without a driver or GPU
        ("7.5\\n", 0, "80;86;90"),  # only GPUs older than the kernels
        ("9.0\\n9.0\\n8.6\\n", 0, "90;86"),  # the machine's own GPUs
        ("12.0\\n", 0, "120"),
    ],
    ids=["no_gpu", "old_gpu", "two_kinds", "two_digit_major"],
)
def test_architectures_follow_the_visible_gpus(tmp_path, output, exit_code, expected):
    assert _picked_architectures(tmp_path, _fake_nvidia_smi(tmp_path, output, exit_code)) == expected


def test_architectures_without_nvidia_smi(tmp_path):
    assert _picked_architectures(tmp_path, tmp_path / "absent") == "80;86;90"


@pytest.mark.skipif(shutil.which("nvcc") is None or torch.version.cuda is None, reason="needs nvcc and a CUDA torch")
def test_pip_build_configures_with_nvcc_and_no_gpu(tmp_path):
    """`pip install . --no-build-isolation` once failed here: CUDA_ARCHITECTURES is empty for
    target dualkv. Configures with pyproject.toml's own definitions, as scikit-build-core does."""
    defines = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]["cmake"]["define"]
    arguments = [f"-D{name}={value}" for name, value in defines.items()]
    no_gpu = _fake_nvidia_smi(tmp_path, "", 9)
    build = tmp_path / "build"
    result = subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(build),
            *arguments,
            "-DDUALKV_ENABLE_CUDA=ON",
            f"-DDUALKV_NVIDIA_SMI={no_gpu}",
            f"-DPython_EXECUTABLE={sys.executable}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    cache = (build / "CMakeCache.txt").read_text()
    assert "CMAKE_CUDA_ARCHITECTURES:STRING=80;86;90" in cache


def test_installed_package_holds_no_cpp_package():
    """pip installs the extension only; the C++ package (component "cpp") stays out of site-packages."""
    import dualkv

    site = pathlib.Path(dualkv.__file__).parent.parent
    assert not (site / "lib" / "cmake" / "dualkv").exists()
    assert not (site / "include" / "dualkv").exists()
