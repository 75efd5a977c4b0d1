"""servegate's exit codes and the one error base every stage's errors derive from.

Exit codes (the contract CI relies on): 0 pass / improvement, 1 regression, 2 infrastructure
or input error, 3 inconclusive (``--strict``), 130 / 143 interrupted. Stage errors keep their
builtin second base (``ValueError``, ``RuntimeError``) so callers catching those still do."""

from __future__ import annotations

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INFRA = 2
EXIT_INCONCLUSIVE = 3
EXIT_SIGINT = 130           # 128 + signal number, as shells and CI runners expect
EXIT_SIGTERM = 143


class ServegateError(Exception):
    """An error servegate raises on purpose; the message names the file/field/step at fault."""

    exit_code: int = EXIT_INFRA
