"""Rollout files: JSONL and parquet give the same RolloutGroups, and a malformed group is refused
with the same check in both formats, the error naming the line or row and the field."""

import sys

import pytest
from training_support import records, rollouts, write_rollouts

from dualkv.training import RolloutGroup, load_jsonl, load_parquet, load_rollouts

# A valid group, then one that breaks a rule: (record, the error's detail).
GOOD = {"prompt": [1, 2], "responses": [[3], [4, 5]], "rewards": [1.0, 0.0]}
MALFORMED = [
    ({"prompt": [1], "responses": [[3], []], "rewards": [1.0, 0.0]}, r"responses\[1\]: needs at least one token"),
    ({"prompt": [1], "responses": [[3, -1]], "rewards": [1.0]}, r"responses\[0\]: token ids must be non-negative"),
    ({"prompt": [], "responses": [[3]], "rewards": [1.0]}, r"prompt: needs at least one token"),
    ({"prompt": None, "responses": [[3]], "rewards": [1.0]}, r"prompt: expected a list of token ids, got NoneType"),
    ({"prompt": [1], "responses": [], "rewards": []}, r"responses: a group needs at least one response"),
    ({"prompt": [1], "responses": [[3]], "rewards": [1.0, 2.0]}, r"rewards: expected one per response \(1\), got 2"),
    ({"prompt": [1], "responses": [[3]], "rewards": [float("nan")]}, r"rewards\[0\]: expected a finite number"),
    ({"prompt": [1], "responses": [[3]], "rewards": None}, r"rewards: expected a list of numbers, got NoneType"),
]


def test_jsonl_and_parquet_hold_the_same_groups(tmp_path):
    groups = rollouts()
    write_rollouts(tmp_path / "r.jsonl", records(groups))
    write_rollouts(tmp_path / "r.parquet", records(groups))
    from_jsonl, from_parquet = load_rollouts(tmp_path / "r.jsonl"), load_rollouts(tmp_path / "r.parquet")
    assert from_jsonl == from_parquet == groups
    assert all(isinstance(g, RolloutGroup) for g in from_parquet)


def test_parquet_reads_every_record_batch_and_ignores_extra_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    groups = rollouts()
    table = pa.Table.from_pylist(records(groups)).append_column("source", pa.array(["x"] * len(groups)))
    pq.write_table(table, tmp_path / "r.parquet", row_group_size=1)  # one group per row group
    assert load_parquet(tmp_path / "r.parquet") == groups


@pytest.mark.parametrize("record, detail", MALFORMED)
def test_a_malformed_group_is_refused_alike_in_both_formats(tmp_path, record, detail):
    write_rollouts(tmp_path / "bad.jsonl", [GOOD, record])
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: " + detail):
        load_jsonl(tmp_path / "bad.jsonl")
    write_rollouts(tmp_path / "bad.parquet", [GOOD, record])
    with pytest.raises(ValueError, match=r"bad\.parquet: row 1: " + detail):
        load_parquet(tmp_path / "bad.parquet")


@pytest.mark.parametrize("suffix, where", [(".jsonl", r"bad\.jsonl:2"), (".parquet", r"bad\.parquet: row 1")])
def test_token_ids_outside_the_vocabulary_name_the_file_line_and_vocabulary(tmp_path, suffix, where):
    write_rollouts(tmp_path / f"bad{suffix}", [GOOD, {"prompt": [1], "responses": [[3], [4, 9]], "rewards": [1, 0]}])
    load_rollouts(tmp_path / f"bad{suffix}")  # without a vocabulary: no bound
    detail = r": responses\[1\]\[1\]: token id 9 is outside the model's vocabulary of 9 ids \(0\.\.8\)"
    with pytest.raises(ValueError, match=where + detail):
        load_rollouts(tmp_path / f"bad{suffix}", vocab_size=9)


def test_a_missing_field_or_column_is_named(tmp_path):
    write_rollouts(tmp_path / "bad.jsonl", [GOOD, {"prompt": [1], "responses": [[3]]}])
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: missing field 'rewards'"):
        load_jsonl(tmp_path / "bad.jsonl")
    write_rollouts(tmp_path / "bad.parquet", [{"prompt": [1], "responses": [[3]]}])
    with pytest.raises(ValueError, match=r"bad\.parquet: missing column 'rewards'"):
        load_parquet(tmp_path / "bad.parquet")


def test_a_column_of_the_wrong_type_is_named(tmp_path):
    # JSON keeps each value's type, so one float id is refused on its line; parquet widens the
    # whole column to float, which is refused as a column.
    record = {"prompt": [1.5], "responses": [[3]], "rewards": [1.0]}
    write_rollouts(tmp_path / "bad.jsonl", [GOOD, record])
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: prompt: token ids must be non-negative integers"):
        load_jsonl(tmp_path / "bad.jsonl")
    write_rollouts(tmp_path / "bad.parquet", [GOOD, record])
    with pytest.raises(ValueError, match=r"bad\.parquet: column 'prompt': expected a list of integers, got list<"):
        load_parquet(tmp_path / "bad.parquet")
    write_rollouts(tmp_path / "flat.parquet", [{"prompt": [1], "responses": [3], "rewards": [1.0]}])
    with pytest.raises(ValueError, match=r"flat\.parquet: column 'responses': expected a list of lists of integers"):
        load_parquet(tmp_path / "flat.parquet")
    write_rollouts(tmp_path / "text.parquet", [{"prompt": [1], "responses": [[3]], "rewards": ["good"]}])
    with pytest.raises(ValueError, match=r"text\.parquet: column 'rewards': expected a list of numbers"):
        load_parquet(tmp_path / "text.parquet")


def test_files_that_are_not_rollouts_are_refused(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"prompt": [1]\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: not a JSON object"):
        load_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r"list\.jsonl:1: expected an object with the fields"):
        load_jsonl(tmp_path / "list.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no rollout group"):
        load_jsonl(tmp_path / "empty.jsonl")
    pytest.importorskip("pyarrow")
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"text\.parquet: not a readable parquet file"):
        load_parquet(tmp_path / "text.parquet")
    write_rollouts(tmp_path / "empty.parquet", [])
    with pytest.raises(ValueError, match=r"(missing column|no rollout group)"):
        load_parquet(tmp_path / "empty.parquet")


def test_the_suffix_chooses_the_format(tmp_path):
    with pytest.raises(ValueError, match=r"path: expected a rollout file ending in one of \('.jsonl', '.parquet'\)"):
        load_rollouts(tmp_path / "rollouts.csv")


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    # None in sys.modules makes `import pyarrow` raise ImportError, as on a machine without it.
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"needs pyarrow: pip install 'dualkv\[parquet\]'"):
        load_rollouts(tmp_path / "r.parquet")
