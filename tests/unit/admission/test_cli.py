"""The admission CLI contract: bad input exits 2 naming the option (checked before sglang loads);
the JSON contract comes from a real replay (marked ``sglang``)."""

from __future__ import annotations

import pytest

from servegate.admission.cli import main


@pytest.mark.parametrize(("args", "option"), [
    (["--page-size", "64", "--chunk-size", "1000", "--prompt-lens", "10"], "--chunk-size"),
    (["--page-size", "64", "--chunk-size", "2048", "--prompt-lens", "10,-5"], "--prompt-lens"),
    (["--page-size", "64", "--chunk-size", "2048", "--prompt-lens", "10", "--exact-fill", "maybe"],
     "--exact-fill"),
    (["--page-size", "0", "--chunk-size", "2048", "--prompt-lens", "10"], "--page-size"),
])
def test_bad_input_exits_2_naming_the_option(args: list[str], option: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        code = main(["replay", *args])
        raise SystemExit(code)
    assert exc.value.code == 2
    assert option in capsys.readouterr().err
