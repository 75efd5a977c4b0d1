"""Fixtures of the history-site tests: the seeded store (history_site_store.py), its analysis and
its site, each built once per session (publishing analyses 33 series: about 1.5 s on 2 cores)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from history_site_store import SeededStore, build_store

from servegate.history.cli import main
from servegate.history.report import SeriesReport, analyse
from servegate.history.store import read_store


@pytest.fixture(scope="session")
def seeded_store(tmp_path_factory: pytest.TempPathFactory) -> SeededStore:
    """40 nights: a confirmed 8 % step at night 20, a transient, a suspected last night."""
    return build_store(tmp_path_factory.mktemp("history-store"))


@pytest.fixture(scope="session")
def published_site(seeded_store: SeededStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of the seeded store, published once through the CLI (tests must not edit it)."""
    out = tmp_path_factory.mktemp("history-site") / "site"
    assert main(["publish", "--store", str(seeded_store.store), "--out", str(out)],
                out=io.StringIO()) == 0
    return out


@pytest.fixture(scope="session")
def reports(seeded_store: SeededStore) -> dict[tuple, SeriesReport]:
    """``history report``'s analysis of the seeded store, per series key."""
    return {r.key: r for r in analyse(read_store(seeded_store.store).records)}
