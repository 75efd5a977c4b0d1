"""The verdict as people read it: one headline, the gated checks, one line for the rest.

Shared by the terminal, ``summary.md`` and ``junit.xml``, so the three cannot disagree
(:func:`verdict_block`; ``verbose`` lists every check and note). Pure functions: no file I/O."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servegate.report import attribution
from servegate.report.reference import reference_text

if TYPE_CHECKING:
    from servegate.judge.checks import Check
    from servegate.judge.judgement import Judgement

STATES = ("regression", "error", "inconclusive", "improvement", "pass")   # worst first
MAX_GATED_LINES = 12      # more gated checks than this: the decided ones are counted, not listed
MAX_NOTES = 3
MAX_NAMES = 4             # checks named in one summary line
INDENT = "  "
# Notes that are routine bookkeeping: in verdict.json, summary.md and --verbose, not the block.
ROUTINE_NOTES = (re.compile(r"^judge settings from "), re.compile(r"^judge seed "),
                 re.compile(r"\bchecks judged together\b"),
                 re.compile(r"^gated family of \d+ checks"),
                 re.compile(r"^baseline .*: \d+ points$"))


# ----------------------------------------------------------------------------- which checks

def is_gated(check: Check) -> bool:
    """In the suite's primary family and gating (an old-style judgement: every gating check)."""
    return check.gate and check.primary


def gated_checks(judgement: Judgement) -> list[Check]:
    return [check for check in judgement.checks if is_gated(check)]


def reported_checks(judgement: Judgement) -> list[Check]:
    """Reported with their intervals, never changing the exit code."""
    return [check for check in judgement.checks if not is_gated(check)]


def family(judgement: Judgement) -> dict[str, Any]:
    """``{"method", "size", "checks"}``; an old-style judgement (no family recorded): Bonferroni
    over ``family_size``, every gating check."""
    if judgement.family:
        return dict(judgement.family)
    return {"method": "bonferroni", "size": judgement.family_size,
            "checks": [check.name for check in gated_checks(judgement)]}


# ------------------------------------------------------------------------------- formatting

def _num(value: float) -> str:
    """0.05 -> "5", 0.025 -> "2.5" (percent or points, at most one decimal)."""
    text = f"{100 * value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def effect_text(check: Check) -> str:
    """``x1.081 [1.062, 1.101]`` (ratio), ``-0.4 pp [-1.9, +1.1]`` (difference) or "" (none)."""
    iv = check.interval
    if iv is None:
        return ""
    if iv.scale == "ratio":
        return f"x{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
    return f"{100 * iv.estimate:+.1f} pp [{100 * iv.low:+.1f}, {100 * iv.high:+.1f}]"


def floor_text(check: Check) -> str:
    """``floor 5 %`` / ``floor 1 pp``; ``margin ±15 %`` for a two-sided (equivalence) check."""
    if check.floor is None:
        return ""
    difference = check.interval is not None and check.interval.scale == "difference"
    unit = "pp" if difference else "%"
    bounds = check.decision_boundaries()
    if bounds is not None and len(bounds) == 2:
        return f"margin ±{_num(check.floor)} {unit}"
    if check.by_resolution:
        return (f"floor {_num(check.floor)} {unit}, no regression > {_num(check.resolution)} "
                f"{unit} (this design's resolution)")
    if check.verdict != "pass" and (check.resolution or 0.0) > check.floor:
        return f"floor {_num(check.floor)} {unit}, this design's resolution " \
               f"{_num(check.resolution)} {unit}"
    return f"floor {_num(check.floor)} {unit}"


def short_reason(reason: str, limit: int = 90) -> str:
    """The first clause of a reason, at most ``limit`` characters."""
    head = reason.split("; ")[0].strip()
    return head if len(head) <= limit else head[:limit - 3].rstrip() + "..."


def measurement(check: Check) -> str:
    """``x1.081 [1.062, 1.101], floor 5 %``, or the (short) reason when there is no interval."""
    if check.interval is None:
        return check.reason if check.verdict == "error" else short_reason(check.reason)
    return ", ".join(part for part in (effect_text(check), floor_text(check)) if part)


def check_line(check: Check) -> str:
    """One gated check, compact: ``REGRESSION   on@c4 mean_ttft_ms vs baseline: x1.2 [..]``."""
    body = measurement(check)
    return f"{check.verdict.upper():<12} {check.name}" + (f": {body}" if body else "")


def counts_text(checks: Iterable[Check]) -> str:
    """``4 pass, 2 inconclusive`` (worst verdict first)."""
    counts = Counter(check.verdict for check in checks)
    return ", ".join(f"{counts[state]} {state}" for state in STATES if counts[state])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _names(checks: Sequence[Check]) -> str:
    shown = [f"{check.name} ({check.verdict} {effect_text(check)})".replace(" )", ")")
             for check in checks[:MAX_NAMES]]
    more = len(checks) - MAX_NAMES
    return ", ".join(shown) + (f", +{more} more" if more > 0 else "")


# -------------------------------------------------------------------------------- headline

def status(judgement: Judgement) -> str:
    """``REGRESSION (exit 1)``; ``INCONCLUSIVE (exit 3, --strict)``."""
    strict = ", --strict" if judgement.strict and judgement.overall == "inconclusive" else ""
    return f"{judgement.overall.upper()} (exit {judgement.exit_code}{strict})"


def _deciding(judgement: Judgement, verdict: str) -> list[Check]:
    """The checks behind the overall verdict: gated ones first, else any gating one."""
    for pool in (gated_checks(judgement), [c for c in judgement.checks if c.gate],
                 judgement.checks):
        found = [check for check in pool if check.verdict == verdict]
        if found:
            return found
    return []


def _undecided_why(undecided: list[Check]) -> str:
    straddle = sum(1 for check in undecided if check.interval is not None)
    causes = []
    if straddle:
        causes.append("interval reaches past the floor" if straddle == 1
                      else f"{straddle} intervals reach past their floors")
    reasons = Counter(short_reason(c.reason, 60) or "no interval"
                      for c in undecided if c.interval is None)
    causes += [f"{n} without an interval: {reason}" for reason, n in reasons.most_common()]
    return "; ".join(causes)


def why(judgement: Judgement) -> str:
    """The headline's reason: the first regression / error, the undecided gated checks, or the
    counts of a pass."""
    overall = judgement.overall
    gated = gated_checks(judgement)
    deciding = _deciding(judgement, overall)
    if overall == "regression" and deciding:
        first = deciding[0]
        more = len(deciding) - 1
        sep = " " if first.interval is not None else ": "
        return f"{first.name}{sep}{measurement(first)}" + (
            f" (+{more} more regression{'s' if more > 1 else ''})" if more else "")
    if overall == "error" and deciding:
        first = deciding[0]
        lead = f"{len(deciding)} errors, first: " if len(deciding) > 1 else ""
        return f"{lead}{first.name}: {first.reason or 'error'}"
    if overall == "inconclusive" and deciding:
        rest = [check for check in gated if all(check is not d for d in deciding)]
        if len(deciding) == 1:
            first = deciding[0]
            text = (f"{first.name} {effect_text(first)} reaches past its {floor_text(first)}"
                    if first.interval is not None and first.floor is not None
                    else f"{first.name}: {short_reason(first.reason) or 'undecided'}")
        else:
            text = (f"{len(deciding)} of {_plural(len(gated), 'gated check')} undecided "
                    f"({_undecided_why(deciding)})")
        return text + (f"; {counts_text(rest)}" if rest else "")
    if not gated:
        return "no gated checks"
    return f"{_plural(len(gated), 'gated check')}: {counts_text(gated)}"


def headline(judgement: Judgement) -> str:
    """The first line: ``REGRESSION (exit 1): on@c64 mean_ttft_ms vs baseline x1.081 [1.062,
    1.101], floor 5 %``."""
    return f"{status(judgement)}: {why(judgement)}"


def reference_line(judgement: Judgement) -> str | None:
    """``reference: baseline from another machine: host a -> b, ...``, or the baseline not
    judged against (other hardware); None: same machine and software, or not recorded."""
    text = judgement.reference or reference_text(judgement.baseline, judgement.run)
    return None if text is None else f"reference: {text}"


# -------------------------------------------------------------------- the rest of the block

def family_line(judgement: Judgement) -> str:
    """``gated: 8 checks (holm over 8, 95 % family-wise)``, plus where a sequential run stopped."""
    fam = family(judgement)
    n = len(gated_checks(judgement))
    stop = sequential_text(judgement)
    return (f"gated: {_plural(n, 'check')} ({fam.get('method', 'bonferroni')} over "
            f"{fam.get('size', judgement.family_size)}, "
            f"{_num(judgement.config.confidence)} % family-wise"
            f"{'; ' + stop if stop else ''})")


def sequential_text(judgement: Judgement) -> str | None:
    """``stopped at look 1 of 3 (2 of 4 blocks): ~12.5 min saved`` for a run that stopped
    early, ``all 3 looks: ran to the maximum`` for one that did not (None: no looks)."""
    record = (judgement.run or {}).get("sequential") or {}
    looks = record.get("looks") or []
    if not looks:
        return None
    at, unit = record.get("stopped_at_blocks"), record.get("unit", "blocks")
    cap = record.get("time_cap")
    if at is None:
        return f"all {len(looks)} looks: ran to its maximum {looks[-1]} {unit}" + (
            f" (the {cap['max_minutes']:g} min time cap; {cap['planned_blocks']} planned)"
            if cap else "")
    index = looks.index(at) + 1 if at in looks else "?"
    return (f"stopped at look {index} of {len(looks)} ({at} of {looks[-1]} {unit}): "
            f"~{record.get('minutes_saved', 0)} min saved")


def gated_lines(judgement: Judgement) -> list[str]:
    """One line per gated check; beyond :data:`MAX_GATED_LINES` the decided ones are counted."""
    gated = gated_checks(judgement)
    if len(gated) <= MAX_GATED_LINES:
        return [check_line(check) for check in gated]
    order = {state: i for i, state in enumerate(STATES)}
    shown = {id(c) for c in sorted(gated, key=lambda c: order[c.verdict])[:MAX_GATED_LINES - 1]}
    hidden = [check for check in gated if id(check) not in shown]
    return [check_line(check) for check in gated if id(check) in shown] + [
        f"... {len(hidden)} more gated ({counts_text(hidden)}): --verbose lists them"]


def reported_line(judgement: Judgement) -> str | None:
    """``not gated: 22 reported (18 inconclusive, 4 pass); beyond their floor: ...``."""
    reported = reported_checks(judgement)
    if not reported:
        return None
    beyond = [check for check in reported if check.verdict in ("regression", "improvement")]
    text = f"not gated: {len(reported)} reported ({counts_text(reported)})"
    return text + (f"; beyond their floor: {_names(beyond)}" if beyond else "")


def _need(check: Check) -> tuple[str, int, float] | None:
    """(unit, count, factor) from the check's guidance (its numbers, not its text)."""
    guide = check.guidance
    if guide is None or guide.decided or not math.isfinite(guide.factor):
        return None
    unit = f"{guide.unit} per side" if guide.unit == "starts" else guide.unit
    return unit, guide.need or 0, guide.factor


def guidance_line(judgement: Judgement) -> str | None:
    """What would decide the inconclusive gated checks: the largest need per unit, once."""
    undecided = [c for c in gated_checks(judgement) if c.verdict == "inconclusive"]
    if not undecided:
        return None
    largest: dict[str, tuple[int, float, Check]] = {}
    stuck = 0
    for check in undecided:
        need = _need(check)
        if need is None:
            stuck += 1
            continue
        unit, count, factor = need
        if unit not in largest or factor > largest[unit][1]:
            largest[unit] = (count, factor, check)
    parts = []
    for unit, (count, factor, check) in largest.items():
        amount = f"~{count} {unit} (x{factor:.1f})" if count else f"x{factor:.1f} {unit}"
        prompts = ""
        guide = check.guidance
        if guide is not None and guide.prompts_factor is None and guide.unit == "starts":
            prompts = ", more prompts alone cannot"
        parts.append(f"{amount} for {check.name}{prompts}")
    if stuck:
        parts.append(f"{stuck} not decidable by more data at this estimate")
    target = ("it" if len(undecided) == 1
              else f"the {len(undecided)} inconclusive gated checks")
    return f"to decide {target}: " + "; ".join(parts)


def budget_line(judgement: Judgement) -> str | None:
    """The run-level noise budget, when the judge provides one (``judgement.budget_text``)."""
    return getattr(judgement, "budget_text", None) or None


def is_routine(note: str) -> bool:
    return any(pattern.search(note) for pattern in ROUTINE_NOTES)


def notes_that_matter(judgement: Judgement) -> list[str]:
    return [note for note in judgement.notes
            if not is_routine(note) and note != judgement.reference]


def note_lines(judgement: Judgement, verbose: bool = False) -> list[str]:
    """Every note when verbose; else the non-routine ones, at most :data:`MAX_NOTES` lines."""
    notes = list(judgement.notes) if verbose else notes_that_matter(judgement)
    if verbose or len(notes) <= MAX_NOTES:
        return [f"note: {note}" for note in notes]
    shown = [f"note: {note}" for note in notes[:MAX_NOTES - 1]]
    return [*shown, f"note: +{len(notes) - len(shown)} more (--verbose, verdict.json)"]


def verdict_block(judgement: Judgement, verbose: bool = False) -> list[str]:
    """The verdict as lines, headline first (no files written; see :func:`files_lines`)."""
    lines = [headline(judgement)]
    ref = reference_line(judgement)
    if ref:
        lines.append(INDENT + ref)
    gated = gated_checks(judgement)
    if gated:
        lines.append(INDENT + family_line(judgement) + ":")
        body = [c.describe() for c in gated] if verbose else gated_lines(judgement)
        lines += [2 * INDENT + line for line in body]
    if verbose:
        reported = reported_checks(judgement)
        if reported:
            lines.append(INDENT + f"not gated: {len(reported)} reported ({counts_text(reported)}):")
            lines += [2 * INDENT + check.describe() for check in reported]
    else:
        line = reported_line(judgement)
        if line:
            lines.append(INDENT + line)
    # a block run's noise budget replaces the per-interval guidance (blind to the two levels)
    extra = budget_line(judgement) or guidance_line(judgement)
    if extra:
        lines.append(INDENT + extra)
    lines += [INDENT + line for line in note_lines(judgement, verbose)]
    lines += [INDENT + line for line in attribution.lines(judgement.run)]
    return lines


def files_lines(paths: Sequence[Path], run_dir: Path, width: int = 100) -> list[str]:
    """The files written, folded: ``wrote into RUN: verdict.json, summary.md, plots/ (5)``
    (two lines when one would be wider than ``width``)."""
    if not paths:
        return []
    entries: dict[str, int] = {}           # a file, or a folder with the files written in it
    for path in paths:
        try:
            parts = Path(path).relative_to(run_dir).parts
        except ValueError:                 # outside the run folder: named in full
            parts = (str(path),)
        key = f"{parts[0]}/" if len(parts) > 1 else parts[0]
        entries[key] = entries.get(key, 0) + (len(parts) > 1)
    shown = ", ".join(f"{key} ({n})" if n else key for key, n in entries.items())
    line = f"wrote into {run_dir}: {shown}"
    if len(line) <= width:
        return [line]
    return [f"wrote into {run_dir}:", INDENT + shown]
