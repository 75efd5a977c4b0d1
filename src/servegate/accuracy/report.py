"""Accuracy section of ``summary.md`` and the paired on/off analysis read from a run folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servegate.accuracy.paired import analyse
from servegate.core.atomic import write_section
from servegate.core.errors import ServegateError
from servegate.core.results import MODES, load_run

HEADING = "## Accuracy (GSM8K)"
REFERENCE = "off"
PAIRS = (("on", REFERENCE), ("forced", REFERENCE))


class RecordsError(ServegateError, ValueError):
    """A ``gsm8k/<mode>.jsonl`` file is missing or malformed; the message names file and field."""


def read_records(run_dir: Path, mode: str) -> dict[int, dict[str, Any]]:
    path = Path(run_dir) / "gsm8k" / f"{mode}.jsonl"
    if not path.is_file():
        raise RecordsError(f"{path}: not found (no GSM8K records for mode {mode!r})")
    records: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordsError(f"{path}: line {number}: not JSON ({err})") from err
        for key, kind in (("id", int), ("gold", str), ("correct", bool)):
            if not isinstance(record.get(key), kind):
                raise RecordsError(f"{path}: line {number}: field {key!r} must be "
                                   f"{kind.__name__}, got {record.get(key)!r}")
        records[record["id"]] = record
    return records


def paired_analysis(run_dir: Path, a: str, b: str, confidence: float = 0.95) -> dict[str, Any]:
    """McNemar analysis of mode ``a`` against mode ``b`` on the questions both answered.

    ``diff`` is ``acc_a - acc_b``; the two files must cover the same question ids with the
    same gold answers (same dataset), otherwise pairing would be meaningless.
    """
    rec_a, rec_b = read_records(run_dir, a), read_records(run_dir, b)
    if set(rec_a) != set(rec_b):
        only = sorted(set(rec_a) ^ set(rec_b))[:5]
        raise RecordsError(f"{run_dir}/gsm8k: {a}.jsonl and {b}.jsonl cover different "
                           f"question ids (e.g. {only}); cannot pair")
    ids = sorted(rec_a)
    for i in ids:
        if rec_a[i]["gold"] != rec_b[i]["gold"]:
            raise RecordsError(f"{run_dir}/gsm8k: id {i}: gold {rec_a[i]['gold']!r} in "
                               f"{a}.jsonl but {rec_b[i]['gold']!r} in {b}.jsonl")
    result = analyse(a, b, [rec_a[i]["correct"] for i in ids],
                     [rec_b[i]["correct"] for i in ids], confidence).as_dict()
    result["output_differs"] = sum(rec_a[i].get("output") != rec_b[i].get("output") for i in ids)
    return result


def paired_for_run(run_dir: Path, modes: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{"on_vs_off": ..., "forced_vs_off": ...}`` for each pair whose records both exist; in a
    head-vs-base run (labels ``head-<mode>``/``base-<mode>``) the same pairs inside each tree
    (``head-on_vs_head-off``: the head's own on-vs-off claim stays paired) and
    ``head-<mode>_vs_base-<mode>`` for every mode, paired on the same questions."""
    present = modes if modes is not None else [
        m for m in MODES if (Path(run_dir) / "gsm8k" / f"{m}.jsonl").is_file()]
    pairs = [(f"{arm}{a}", f"{arm}{b}") for arm in ("", "head-", "base-") for a, b in PAIRS
             if f"{arm}{a}" in present and f"{arm}{b}" in present]
    pairs += [(f"head-{m}", f"base-{m}") for m in MODES
              if f"head-{m}" in present and f"base-{m}" in present]
    return {f"{a}_vs_{b}": paired_analysis(run_dir, a, b) for a, b in pairs}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render_section(run: dict[str, Any], run_dir: Path) -> str:
    """Markdown: per-mode accuracy with its Wilson interval, then each paired comparison."""
    accuracy: dict[str, dict[str, Any]] = run.get("accuracy") or {}
    lines = [HEADING, ""]
    if not accuracy:
        return "\n".join([*lines, "No GSM8K results in this run.", ""])
    first = next(iter(accuracy.values()))
    lines += [f"{first.get('n')} questions, {first.get('shots', '?')}-shot from train "
              f"(seed {first.get('seed', '?')}), greedy; verdict extraction: "
              f"{first.get('extraction', 'flexible')}. Dataset sha256 "
              f"`{str(first.get('dataset_sha256', '?'))[:12]}`.", "",
              "| mode | accuracy | 95% Wilson | correct/n | strict | flexible | invalid "
              "| out tok/s |", "|---|---|---|---|---|---|---|---|"]
    for mode in [m for m in MODES if m in accuracy] + [m for m in accuracy if m not in MODES]:
        r = accuracy[mode]
        lines.append(
            f"| {mode} | {_pct(r['accuracy'])} | {_pct(r['wilson_low'])} - "
            f"{_pct(r['wilson_high'])} | {r['correct']}/{r['n']} | "
            f"{_pct(r.get('strict_accuracy', float('nan')))} | "
            f"{_pct(r.get('flexible_accuracy', float('nan')))} | {r.get('invalid', '?')} | "
            f"{r.get('output_throughput_tok_s', float('nan')):.1f} |")
    paired = run.get("paired_accuracy") or paired_for_run(run_dir, list(accuracy))
    for name, p in paired.items():
        level = float(p.get("confidence", 1 - p["alpha"]))
        verdict = ("excludes 0" if p["significant"] else "includes 0")
        lines += ["", f"**{name.replace('_', ' ')}** (paired, {p['n']} questions): "
                  f"difference {100 * p['diff']:+.2f} pp "
                  f"({100 * level:.4g}% CI {100 * p['diff_low']:+.2f} to "
                  f"{100 * p['diff_high']:+.2f} pp, {verdict}); "
                  f"discordant {p['discordant']} ({p['a_only']} only {p['a']} right, "
                  f"{p['b_only']} only {p['b']} right); exact McNemar p = "
                  f"{p['mcnemar_p']:.3g} (an equality test, for information: the gate judges "
                  f"the interval against its margin in the Verdict section). "
                  f"Smallest detectable difference: {100 * p['mde']:.2f} pp "
                  f"({p['mde_method']})."]
        if "output_differs" in p:
            lines.append(f"Generated text differed on {p['output_differs']} of {p['n']} "
                         "questions (batch composition changes bf16 numerics; expected).")
    return "\n".join([*lines, ""])


def append_summary(run_dir: Path) -> None:
    """Add or replace the accuracy section of ``run_dir/summary.md`` (atomic rewrite)."""
    run_dir = Path(run_dir)
    section = render_section(dict(load_run(run_dir)), run_dir)
    write_section(run_dir / "summary.md", HEADING, section)
