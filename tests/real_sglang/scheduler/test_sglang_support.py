"""on/forced on an sglang without PR #32888 fail at once, naming the version and the minimum."""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_trees import release_tree

from servegate.serve.support import MIN_VERSION, UnsupportedSglang, locate_sglang, require_exact_fill


@pytest.mark.sglang
def test_release_without_the_gate_is_refused_for_on_and_forced() -> None:
    old = locate_sglang([str(release_tree("0.5.19"))])
    assert old.version == "0.5.19" and old.has_gate is False
    require_exact_fill(["off"], old)  # off needs no gate
    with pytest.raises(UnsupportedSglang) as info:
        require_exact_fill(["off", "on", "forced"], old)
    message = str(info.value)
    assert "sglang 0.5.19" in message and f">= {MIN_VERSION}" in message
    assert "modes on, forced" in message and str(old.package_dir) in message


@pytest.mark.sglang
def test_first_release_with_the_gate_is_accepted() -> None:
    first = locate_sglang([str(release_tree("0.5.20"))])
    assert first.version == "0.5.20" and first.has_gate is True
    require_exact_fill(["off", "on", "forced"], first)


@pytest.mark.sglang
def test_the_environments_sglang_has_the_gate() -> None:
    info = locate_sglang()
    assert info.has_gate, info
    assert tuple(int(p) for p in info.version.split(".")[:3]) >= (0, 5, 20)


@pytest.mark.sglang
def test_bench_refuses_before_any_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from servegate.commands import bench

    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    monkeypatch.syspath_prepend(str(release_tree("0.5.19")))
    code = bench.main(["--suite", "cpu", "--modes", "off,forced",
                       "--results-dir", str(tmp_path / "results")])
    assert code == 2
    assert "sglang 0.5.19" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
