"""Loading GSM8K through ``datasets`` from local files: schema checks, sha256, clear errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from repo_files import packaged_gsm8k

from servegate.accuracy import dataset as dataset_module
from servegate.accuracy.dataset import (
    HUB_ID,
    DatasetError,
    load_gsm8k,
    resolve_source,
    sibling_train,
)

pytest.importorskip("datasets", reason="GSM8K loading goes through the `datasets` library")


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_real_test_split_loads_with_its_sha256(tmp_path: Path) -> None:
    path = packaged_gsm8k() / "test.jsonl"
    data = load_gsm8k(str(path), "test", cache_dir=str(tmp_path))
    assert len(data.rows) == 1319
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # the canonical rendering used for hub copies reproduces the file byte for byte
    assert data.content_sha256 == data.sha256
    assert data.rows[0].gold == "18" and data.rows[0].index == 0
    assert data.rows[0].question.startswith("Janet")
    assert sibling_train(str(path)) == str(path.parent / "train.jsonl")


def test_directory_resolves_to_split_file(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [{"question": "q?", "answer": "so\n#### 1,500"}])
    data = load_gsm8k(str(tmp_path), "train", cache_dir=str(tmp_path / "cache"))
    assert [r.gold for r in data.rows] == ["1500"]
    assert data.sha256 == hashlib.sha256((tmp_path / "train.jsonl").read_bytes()).hexdigest()


def test_sha256_changes_with_content(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [{"question": "q", "answer": "#### 1"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"question": "q", "answer": "#### 2"}])
    cache = str(tmp_path / "cache")
    assert load_gsm8k(str(a), "test", cache).sha256 != load_gsm8k(str(b), "test", cache).sha256


@pytest.mark.parametrize(("rows", "message"), [
    ([{"question": "q", "answer": "#### 1"}, {"question": "q2", "solution": "#### 2"}],
     r"record 2: field 'answer' must be a non-empty string"),
    ([{"prompt": "q", "answer": "#### 1"}], r"field 'question' missing"),
    ([{"question": "q", "answer": "the answer is 4"}], r"record 1: field 'answer' must end in"),
    ([{"question": "", "answer": "#### 4"}], r"record 1: field 'question' must be a non-empty"),
])
def test_malformed_file_names_file_and_field(tmp_path: Path, rows: list[dict[str, object]],
                                             message: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DatasetError, match=message) as info:
        load_gsm8k(str(path), "test", cache_dir=str(tmp_path / "cache"))
    assert str(path) in str(info.value)


def test_broken_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(DatasetError, match="not valid JSON lines") as info:
        load_gsm8k(str(path), "test", cache_dir=str(tmp_path / "cache"))
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="GSM8K file not found"):
        load_gsm8k(str(tmp_path / "nope.jsonl"), "test")


def test_packaged_is_the_default_source_for_both_splits(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    test = load_gsm8k(None, "test", cache_dir=cache)
    train = load_gsm8k("packaged", "train", cache_dir=cache)
    assert (len(test.rows), len(train.rows)) == (1319, 7473)
    # the pins are the real files' digests, computed here independently of the module
    for data, name in ((test, "test.jsonl"), (train, "train.jsonl")):
        shipped = packaged_gsm8k() / name
        assert data.source == str(shipped)
        assert data.sha256 == hashlib.sha256(shipped.read_bytes()).hexdigest()
        assert data.content_sha256 == data.sha256  # source-independent fingerprint
    assert (packaged_gsm8k() / "LICENSE").read_text().startswith("MIT License")


def test_hub_source_names_the_hub_id() -> None:
    assert resolve_source("hub", "test") == HUB_ID
    assert resolve_source("/some/dir", "test") == "/some/dir"


def test_modified_packaged_file_names_file_and_both_digests(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "gsm8k"
    copy.mkdir()
    original = (packaged_gsm8k() / "test.jsonl").read_bytes()
    (copy / "test.jsonl").write_bytes(original.replace(b"#### 18", b"#### 19", 1))
    monkeypatch.setattr(dataset_module, "PACKAGED_DIR", copy)
    with pytest.raises(DatasetError) as info:
        load_gsm8k("packaged", "test", cache_dir=str(tmp_path / "cache"))
    message = str(info.value)
    assert str(copy / "test.jsonl") in message
    assert hashlib.sha256(original).hexdigest() in message
    assert hashlib.sha256((copy / "test.jsonl").read_bytes()).hexdigest() in message
