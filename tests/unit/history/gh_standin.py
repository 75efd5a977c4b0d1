"""A recording stand-in for GitHub's ``gh`` CLI (test double: GitHub cannot be reached here).

Put first on PATH as ``gh`` (:func:`install`). It appends every call's argv (and the body read
from stdin) to ``calls.jsonl`` and keeps the repository's issues in ``issues.json`` in the
folder ``$GH_STANDIN_DIR``, so state persists from one night's call to the next. It answers only
what the alert step uses, the way gh does, and refuses anything else (exit 1, message on stderr)
so a call the real gh would reject fails here too: an unknown issue, reopening an open issue,
closing a closed one, a label that was never created.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _fail(message: str) -> int:
    print(f"gh stand-in: {message}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    folder = Path(os.environ["GH_STANDIN_DIR"])
    state_path = folder / "issues.json"
    state: dict[str, Any] = (json.loads(state_path.read_text()) if state_path.exists()
                             else {"issues": [], "labels": []})
    body = sys.stdin.read() if _option(argv, "--body-file") == "-" else None
    with (folder / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps({"argv": argv, "stdin": body}) + "\n")
    issues = {issue["number"]: issue for issue in state["issues"]}
    group, verb, *rest = [*argv, "", ""][:2] + argv[2:]
    if (group, verb) == ("label", "create"):
        if rest[0] not in state["labels"]:
            state["labels"].append(rest[0])
    elif (group, verb) == ("issue", "list"):
        label, state_filter = _option(rest, "--label"), _option(rest, "--state") or "open"
        fields = (_option(rest, "--json") or "").split(",")
        rows = [{f: i[f] for f in fields} for i in state["issues"] if label in i["labels"]
                and (state_filter == "all" or i["state"] == state_filter.upper())]
        print(json.dumps(rows))
        return 0
    elif (group, verb) == ("issue", "create"):
        label = _option(rest, "--label")
        if label not in state["labels"]:
            return _fail(f"could not add label: '{label}' not found")
        number = len(state["issues"]) + 1
        state["issues"].append({"number": number, "title": _option(rest, "--title"),
                                "body": body, "state": "OPEN", "labels": [label],
                                "comments": []})
        print(f"https://github.com/{_option(rest, '--repo')}/issues/{number}")
    elif group == "issue" and verb in ("comment", "edit", "reopen", "close"):
        issue = issues.get(int(rest[0])) if rest and rest[0].isdigit() else None
        if issue is None:
            return _fail(f"issue {rest[:1]} not found")
        if verb == "comment":
            issue["comments"].append(body)
        elif verb == "edit":
            issue["body"] = body
        elif verb == "reopen":
            if issue["state"] == "OPEN":
                return _fail(f"issue #{issue['number']} is already open")
            issue["state"] = "OPEN"
        else:
            if issue["state"] == "CLOSED":
                return _fail(f"issue #{issue['number']} is already closed")
            issue["state"] = "CLOSED"
            issue["comments"].append(_option(rest, "--comment"))
    else:
        return _fail(f"unsupported command {argv[:2]}")
    state_path.write_text(json.dumps(state, indent=1))
    return 0


def install(bin_dir: Path, state_dir: Path) -> dict[str, str]:
    """Write ``gh`` (this script) and ``python`` (this interpreter) into ``bin_dir``; the
    environment that puts them first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    for name, target in (("gh", f'"{sys.executable}" "{Path(__file__).resolve()}"'),
                         ("python", f'"{sys.executable}"')):
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "GH_STANDIN_DIR": str(state_dir)}


def calls(state_dir: Path) -> list[dict[str, Any]]:
    path = state_dir / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def issues(state_dir: Path) -> list[dict[str, Any]]:
    path = state_dir / "issues.json"
    return json.loads(path.read_text())["issues"] if path.exists() else []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
