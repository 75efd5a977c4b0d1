"""suites/admission.toml is validated: the real file loads; bad keys name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_files import REPO_ROOT

from servegate.admission.suite import SuiteError, load_suite

REPO = REPO_ROOT


def test_real_suite_covers_the_required_matrix() -> None:
    suite = load_suite(REPO / "suites" / "admission.toml")
    ids = {s.scenario_id for s in suite.scenarios}
    assert {s.page_size for s in suite.scenarios} >= {1, 8, 64}
    assert {s.chunk_size for s in suite.scenarios} >= {2048, 16384}
    assert {s.mix for s in suite.scenarios} >= {"one-long", "many-medium", "not-page-multiples",
                                                "long-and-tiny", "shared-prefixes"}
    assert {s.path for s in suite.scenarios} >= {"radix", "no-radix", "no-radix-ignore-eos"}
    assert set(suite.modes) == {"off", "on", "forced"}
    assert any(s.truncation_align_size for s in suite.scenarios)
    assert len(ids) == len(suite.scenarios) >= 90


@pytest.mark.parametrize(("text", "needle"), [
    ("[admission]\npage_sizes = [64]\n", "missing required key 'admission.chunk_sizes'"),
    ('[admission]\npage_sizes=[64]\nchunk_sizes=[]\nmixes=["one-long"]\npaths=["radix"]\n'
     'modes=["off"]\n', "'chunk_sizes' must not be empty"),
    ('[admission]\npage_sizes=["64"]\nchunk_sizes=[2048]\nmixes=["one-long"]\npaths=["radix"]\n'
     'modes=["off"]\n', "admission.page_sizes[0]: expected integer"),
    ('[admission]\npage_sizes=[64]\nchunk_sizes=[100]\nmixes=["one-long"]\npaths=["radix"]\n'
     'modes=["off"]\n', "must be a multiple of --page-size"),
    ('[admission]\npage_sizes=[64]\nchunk_sizes=[2048]\nmixes=["nope"]\npaths=["radix"]\n'
     'modes=["off"]\n', "'mixes' has unknown ['nope']"),
    ('[admission]\npage_size=[64]\n', "unknown key 'page_size'"),
    ("not toml [", "not valid TOML"),
])
def test_bad_suite_names_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert str(path) in str(err.value) and needle in str(err.value)
