"""Faults of the results folder and the disk: the run folder cannot be created or is read-only,
the disk fills (or turns read-only) mid-run, and atomic writes keep the previous file whole.

No server needed: the fault strikes before one would start (model preparation is stubbed).
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest
from fault_helpers import _assert_no_half_json, _cause, _failing_disk

from servegate import atomic, bench

# --------------------------------------------------------------------------- results folder

@pytest.fixture
def no_model_prep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tag: str) -> None:
    """Model preparation is not under test here (the fault strikes before a server would start)."""
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")


@pytest.mark.usefixtures("no_model_prep")
def test_results_dir_not_creatable(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be\n")
    code = bench.main(["--suite", "cpu", "--results-dir", str(blocker / "sub")])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert re.fullmatch(r"cannot create the run folder: \[Errno 20\] Not a directory: .*",
                        _cause(err))
    assert blocker.read_text().startswith("a file")


@pytest.mark.usefixtures("no_model_prep")
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_results_dir_read_only(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir(mode=0o555)
    try:
        code = bench.main(["--suite", "cpu", "--results-dir", str(results)])
    finally:
        results.chmod(0o755)
    _, err = capfd.readouterr()
    assert code == 2 and "Permission denied" in _cause(err)
    assert list(results.iterdir()) == []

@pytest.mark.usefixtures("no_model_prep")
@pytest.mark.parametrize("err_no", [errno.ENOSPC, errno.EROFS])
def test_disk_full_mid_run_keeps_previous_run_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        err_no: int) -> None:
    """run.json + summary.md are written once, then the disk fills (or turns read-only) at the
    next save: exit 2 naming the file, the previous run.json intact, no temp file left."""
    results = tmp_path / "results"
    written = _failing_disk(monkeypatch, results, err_no, after=2)
    code = bench.main(["--suite", "cpu", "--results-dir", str(results), "--no-compare"])
    out, err = capfd.readouterr()
    assert code == 2
    run_dir = Path(out.strip().splitlines()[-1])
    assert written == ["run.json", "summary.md"]
    cause = _cause(err)
    assert cause == f"OSError: [Errno {err_no}] {os.strerror(err_no)}: '{run_dir / 'run.json'}'"
    run = json.loads((run_dir / "run.json").read_text())      # the first save, whole
    assert run["complete"] is False and run["points"] == [] and "error" not in run
    _assert_no_half_json(run_dir)


def test_atomic_write_on_full_disk_keeps_old_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.json"
    atomic.write_json(path, {"points": [1, 2, 3]})
    _failing_disk(monkeypatch, tmp_path, errno.ENOSPC, after=0)
    with pytest.raises(OSError, match=re.escape(f"No space left on device: '{path}'")):
        atomic.write_json(path, {"points": [1, 2, 3, 4]})
    assert json.loads(path.read_text()) == {"points": [1, 2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
