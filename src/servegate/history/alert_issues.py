"""The alert issues on GitHub: find each series' issue (label :data:`ALERT_LABEL` and the hidden
marker line), decide, and act through ``gh``, which authenticates from ``GH_TOKEN`` so servegate
needs no HTTP client and never sees the token (docs/history.md, Alerts). Argument lists and
bodies on stdin, never a shell string built from data."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servegate.history.alerts import (
    ALERT_LABEL,
    BISECT_LABEL,
    Alert,
    Links,
    marker_key,
    recovered_text,
    render,
)
from servegate.history.store import HistoryError

_LABELS = {ALERT_LABEL: ("B60205", "servegate nightly: a regressed series (one issue each)"),
           BISECT_LABEL: ("5319E7", "servegate: bisect this alert's sglang range")}


@dataclass(frozen=True)
class Issue:
    number: int
    open: bool
    key: str


@dataclass(frozen=True)
class Action:
    verb: str                   # open | update | reopen | close
    key: str
    number: int | None
    title: str
    body: str


def series_issues(issues: Sequence[Issue]) -> dict[str, Issue]:
    """Each series' issue: its oldest open one, else its newest closed one."""
    chosen: dict[str, Issue] = {}
    for issue in sorted(issues, key=lambda i: (not i.open, -i.number if not i.open
                                               else i.number)):
        chosen.setdefault(issue.key, issue)
    return chosen


def plan(alerts: Mapping[str, Alert], judged: Mapping[str, str], issues: Sequence[Issue],
         links: Links) -> list[Action]:
    """What to do tonight (module docstring of servegate.history.alerts), series by series."""
    chosen = series_issues(issues)
    actions = []
    for key, alert in sorted(alerts.items()):
        issue = chosen.get(key)
        body = render(alert, links)
        if issue is not None and issue.open:
            actions.append(Action("update", key, issue.number, alert.title, body))
        elif alert.raised:
            verb = "open" if issue is None else "reopen"
            actions.append(Action(verb, key, issue and issue.number, alert.title, body))
    for key, issue in sorted(chosen.items()):
        prefix = key.split(" ", 1)[0]
        if issue.open and key not in alerts and prefix in judged:
            text = recovered_text(key, judged[prefix])
            if links.run_url:
                text += f" [workflow run]({links.run_url})"
            actions.append(Action("close", key, issue.number, "", text))
    return actions


class Gh:
    """``gh`` with argument lists; ``--repo`` when given (else gh's own default)."""

    def __init__(self, repo: str | None = None, executable: str = "gh") -> None:
        self.repo, self.executable = repo, executable

    def __call__(self, *args: str, body: str | None = None) -> str:
        argv = [self.executable, *args, *(["--repo", self.repo] if self.repo else [])]
        try:
            proc = subprocess.run(argv, input=body, capture_output=True, text=True,
                                  timeout=120, check=False)
        except FileNotFoundError:
            raise HistoryError(f"{self.executable}: not found on PATH (GitHub's hosted runners "
                               "have it; elsewhere see https://cli.github.com)") from None
        except subprocess.TimeoutExpired:
            raise HistoryError(f"gh {' '.join(args[:2])}: no answer in 120 s") from None
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or ["no message"])[0]
            raise HistoryError(f"gh {' '.join(args[:2])} failed (exit {proc.returncode}): {why}")
        return proc.stdout


def list_issues(gh: Gh) -> list[Issue]:
    """Every alert issue, open or closed (found by the label, keyed by the marker)."""
    text = gh("issue", "list", "--label", ALERT_LABEL, "--state", "all", "--limit", "1000",
              "--json", "number,state,body")
    try:
        rows = json.loads(text or "[]")
        found = [(int(row["number"]), str(row["state"]).upper(), marker_key(row["body"]))
                 for row in rows]
    except (ValueError, TypeError, KeyError) as err:
        raise HistoryError(f"gh issue list: unexpected answer ({err})") from None
    return [Issue(number, state == "OPEN", key) for number, state, key in found if key]


def apply(actions: Sequence[Action], gh: Gh) -> list[str]:
    """Carry the actions out; one line each for the log (what was done to which issue)."""
    done = []
    labelled = False
    for action in actions:
        number = str(action.number)
        if action.verb == "open":
            if not labelled:
                for name, (color, about) in _LABELS.items():
                    gh("label", "create", name, "--color", color, "--description", about,
                       "--force")
                labelled = True
            url = gh("issue", "create", "--title", action.title, "--label", ALERT_LABEL,
                     "--body-file", "-", body=action.body).strip()
            done.append(f"opened {url or 'an issue'} for {action.key}")
            continue
        if action.verb == "close":
            gh("issue", "close", number, "--comment", action.body)
            done.append(f"closed #{number} ({action.key}): recovered")
            continue
        if action.verb == "reopen":
            gh("issue", "reopen", number)
        gh("issue", "comment", number, "--body-file", "-", body=action.body)
        gh("issue", "edit", number, "--body-file", "-", body=action.body)
        done.append(f"{'reopened' if action.verb == 'reopen' else 'commented on'} #{number} "
                    f"({action.key})")
    return done
