"""on/forced on an sglang without PR #32888 fail at once, naming the version and the minimum."""

from __future__ import annotations

from pathlib import Path

import pytest

from servegate.serve.support import UnsupportedSglang, locate_sglang


def test_no_sglang_on_the_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedSglang, match=f"no sglang package found on {tmp_path}"):
        locate_sglang([str(tmp_path)])
