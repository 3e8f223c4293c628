"""bench/merge_step_results.py on two real CPU runs of bench/run_step_bench.py (tiny Qwen3, one
(P, N) each, as the GPU grid runs): the merged table, JSON and sources, runs of one (P, N) with
different methods merged into one entry, and its refusals."""

import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import merge_step_results  # noqa: E402
import step_report  # noqa: E402

CONFIGURATIONS = ((16, 3), (16, 2))  # a grid's order need not be the order the runs are passed in


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A folder per (P, N), each with one run's step_bench.json, .txt (and .png with matplotlib)."""
    folders = []
    for p, n in CONFIGURATIONS:
        folder = tmp_path_factory.mktemp(f"P{p}_N{n}")
        result = subprocess.run(
            [sys.executable, str(BENCH / "run_step_bench.py"), "--device", "cpu", "--model", "tiny-qwen3",
             "--prompt-lengths", str(p), "--responses", str(n), "--response-length", "2", "5", "--max-fit", "1",
             "--warmup", "0", "--repeats", "1", "--peak-tflops", "1", "--out", str(folder)],
            capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        folders.append(folder)
    return folders


def _merge_command(*arguments):
    return subprocess.run([sys.executable, str(BENCH / "merge_step_results.py"), *map(str, arguments)],
                          capture_output=True, text=True, timeout=60)


def test_merged_report_holds_both_runs_sorted_and_round_trips(runs, tmp_path):
    first, second = runs
    # A folder and a file, in the reverse of the grid's order.
    result = _merge_command(first, second / "step_bench.json", "--out", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    reports = [json.loads((folder / "step_bench.json").read_text()) for folder in runs]
    merged = json.loads((tmp_path / "step_bench.json").read_text())
    assert [(e["P"], e["N"]) for e in merged["entries"]] == [(16, 2), (16, 3)]
    assert merged["entries"] == reports[1]["entries"] + reports[0]["entries"]
    assert {k: v for k, v in merged.items() if k not in ("entries", "sources")} == {
        k: v for k, v in reports[0].items() if k != "entries"
    }
    assert merged["sources"] == [{"file": str(folder / "step_bench.json"), "torch": reports[0]["torch"]}
                                 for folder in runs]
    # The merged table is each run's rows under one header, written and printed alike.
    rows = [(folder / "step_bench.txt").read_text().splitlines() for folder in runs]
    assert rows[0][0] == rows[1][0] == step_report.HEADER
    table = (tmp_path / "step_bench.txt").read_text()
    assert table.splitlines() == [step_report.HEADER, *rows[1][1:], *rows[0][1:]]
    assert table in result.stdout
    try:
        import matplotlib  # noqa: F401  (optional, as for run_step_bench.py)
    except ImportError:
        assert "step_bench.png not written: matplotlib is not installed" in result.stdout
    else:
        assert (tmp_path / "step_bench.png").stat().st_size > 0
    # The merged JSON loads back into the same report: written again, the same bytes.
    step_report.write_report(merged, tmp_path / "again")
    for name in ("step_bench.json", "step_bench.txt"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / name).read_bytes()


@pytest.mark.parametrize(
    ("field", "value"),
    [("model", "qwen3-8b"), ("num_hidden_layers", 36), ("dtype", "fp32"), ("groups_per_rank", 2),
     ("response_length", [131, 2048]), ("world_size", 2), ("device", "NVIDIA H200"), ("peak_flops_per_gpu", 989e12),
     ("fused_elementwise", True), ("sp", 2)],
)
def test_refuses_runs_that_differ_in_a_compatibility_field(runs, field, value):
    (a, first), (b, second) = [merge_step_results.load(folder) for folder in runs]
    other = copy.deepcopy(second)
    other[field] = value
    expected = f"{field} differs: {first[field]!r} in {a}, {value!r} in {b}"
    with pytest.raises(ValueError) as refused:
        merge_step_results.merge([(a, first), (b, other)])
    assert str(refused.value) == expected


@pytest.mark.parametrize(("field", "absent_means", "other"), [("fused_elementwise", False, True), ("sp", 1, 2)])
def test_a_report_from_before_a_field_merges_as_its_default(runs, field, absent_means, other):
    # Unfused and without sequence parallelism: what every run did before the field was written.
    (a, first), (b, second) = [merge_step_results.load(folder) for folder in runs]
    older = {key: value for key, value in second.items() if key != field}
    assert first[field] == absent_means
    assert merge_step_results.merge([(a, first), (b, older)])[field] == absent_means
    with pytest.raises(ValueError, match=f"{field} differs: {other!r} in"):
        merge_step_results.merge([(a, {**first, field: other}), (b, older)])


def test_a_differing_torch_version_is_kept_per_source(runs):
    (a, first), (b, second) = [merge_step_results.load(folder) for folder in runs]
    other = {**second, "torch": "0.0.0"}
    merged = merge_step_results.merge([(a, first), (b, other)])
    assert merged["torch"] == "mixed, see sources"
    assert [s["torch"] for s in merged["sources"]] == [first["torch"], "0.0.0"]


def test_refuses_a_configuration_given_twice_and_writes_nothing(runs, tmp_path):
    copy_folder = tmp_path / "copy"
    copy_folder.mkdir()
    (copy_folder / "step_bench.json").write_text((runs[0] / "step_bench.json").read_text())
    result = _merge_command(runs[0], runs[1], copy_folder, "--out", tmp_path / "merged")
    assert result.returncode == 1
    assert result.stderr.strip() == (f"merge_step_results.py: refusing to merge: P=16 N=3 dualkv is in both "
                                     f"{runs[0] / 'step_bench.json'} and {copy_folder / 'step_bench.json'}")
    assert not (tmp_path / "merged").exists()


def test_refuses_to_overwrite_an_input_or_read_a_folder_without_a_report(runs, tmp_path):
    result = _merge_command(*runs, "--out", runs[0])
    assert result.returncode == 1
    assert f"--out {runs[0]} holds one of the inputs, which the merged report would overwrite" in result.stderr
    result = _merge_command(runs[0], tmp_path, "--out", tmp_path / "merged")
    assert result.returncode == 1
    assert f"refusing to merge: {tmp_path}: no step_bench.json there" in result.stderr


def _as_method(report: dict, method: str) -> dict:
    """The report with every entry's one CPU method (dualkv) renamed: what a run of the same
    workload with --methods METHOD writes (only dualkv runs on a CPU)."""
    other = copy.deepcopy(report)
    for entry in other["entries"]:
        (result,) = entry["methods"].values()
        entry["methods"] = {method: {**result, "step_s": result["step_s"] * 3}}
    return other


def test_runs_of_one_configuration_with_different_methods_make_one_entry(runs, tmp_path):
    (a, first), (b, second) = [merge_step_results.load(folder) for folder in runs]
    ncopy_file = tmp_path / "ncopy.json"
    ncopy = _as_method(first, "flash_ncopy")
    merged = merge_step_results.merge([(a, first), (b, second), (ncopy_file, ncopy)])
    assert [(e["P"], e["N"]) for e in merged["entries"]] == [(16, 2), (16, 3)]
    assert merged["entries"][0] == second["entries"][0]
    (entry,) = first["entries"]
    assert merged["entries"][1] == {**entry, "methods": {**entry["methods"], **ncopy["entries"][0]["methods"]}}
    assert list(merged["entries"][1]["methods"]) == ["dualkv", "flash_ncopy"]  # the order the runs are given
    assert [row.split()[2] for row in step_report.table(merged).splitlines()[1:]] == ["dualkv", "dualkv", "flash_ncopy"]
    # Given first, the other method leads.
    again = merge_step_results.merge([(ncopy_file, ncopy), (a, first)])
    assert list(again["entries"][0]["methods"]) == ["flash_ncopy", "dualkv"]


@pytest.mark.parametrize("field", ["packed_tokens", "ncopy_pairs", "scored_tokens"])
def test_refuses_one_configuration_whose_runs_ran_different_workloads(runs, field):
    (a, first), _ = [merge_step_results.load(folder) for folder in runs]
    other = _as_method(first, "flash_ncopy")
    value = first["entries"][0][field]
    other["entries"][0][field] = value + 1
    with pytest.raises(ValueError) as refused:
        merge_step_results.merge([(a, first), (pathlib.Path("other.json"), other)])
    assert str(refused.value) == f"P=16 N=3: {field} differs: {value!r} in {a}, {value + 1!r} in other.json"
