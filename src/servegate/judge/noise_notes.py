"""What a block check says about its noise: where each level's variance came from (measured,
the prior named, or the measurement alone when it refuted the prior), and the record the noise
budget reads. Apart from the checks' rules (servegate.judge.block_checks) so each stays one job."""

from __future__ import annotations

import math
from typing import Any

from servegate.judge.checks import Check
from servegate.judge.nested import STATED_LEVEL, Difference
from servegate.judge.priors import LevelPrior


def noise_note(diff: Difference, prior: LevelPrior | None = None,
               check: Check | None = None) -> str:
    """Where each level's variance came from: measured in this run, the prior (named: the
    suite's figure or the learned profile), or the measurement alone when it refuted the
    prior; a level the prior outweighs says the estimate rests on it. ``check``: its
    ``noise`` record gains the prior's name and whether the interval rests on it or refuted
    it (the verdict's notes name a gated check's)."""
    notes = []
    named = f" {prior.text()}" if prior is not None else ""
    if check is not None and check.noise is not None and prior is not None:
        part = diff.parts[0]
        check.noise["prior"] = {
            "text": prior.text(), "learned": prior.learned,
            "refuted": part.between_source == "measured, prior refuted",
            "rests_on_it": part.between_source == "prior" or (
                part.between_source == "measured+prior"
                and prior.dof > part.starts - part.groups)}
    for part in diff.parts:
        level = part.components[0].level
        halves = f" centred on {part.groups} halves" if part.groups > 1 else ""
        sd = math.sqrt(max(part.scalar("between_var"), 0.0))
        if part.between_source == "prior":
            notes.append(f"{level} level from the prior (log-sd {sd:.3f}; {part.starts} start"
                         f"{'s' + halves if halves else ''})"
                         + (f": rests on the prior,{named}" if named else ""))
        elif part.between_source == "measured, prior refuted":
            measured = math.sqrt(max(part.scalar("measured_between_var"), 0.0))
            p = part.scalar("prior_p") if part.prior_p is not None else math.nan
            notes.append(f"{level} level measured over {part.starts} starts{halves} (log-sd "
                         f"{measured:.3f}) far above its prior{named} (F test p {p:.2g} < "
                         f"{STATED_LEVEL:g}): widened to the measurement alone "
                         f"({part.starts - part.groups} dof)")
        else:
            notes.append(f"{level} level {part.between_source} over {part.starts} starts"
                         f"{halves} (log-sd {sd:.3f})")
            if prior is not None and part.between_source == "measured+prior" \
                    and prior.dof > part.starts - part.groups:
                notes[-1] += f": rests on the prior,{named}"
        named, prior = "", None     # a shared start level (two sides) is named once
        if part.blocks < 2:         # e.g. a run from before [design]: a start per repeat
            notes.append("one block per start: its spread is inside the start level")
            continue
        block_sd = math.sqrt(max(part.scalar("block_var"), 0.0))
        notes.append(f"block log-sd {block_sd:.3f} (df {part.scalar('block_df'):.0f})")
    return "; ".join(notes)


def noise_record(diff: Difference, one_sided: bool) -> dict[str, Any]:
    """What the noise budget needs: the current side's levels, the reference side as fixed."""
    part = diff.parts[0]
    return {"starts": part.starts, "blocks": part.blocks,
            "between_var": part.scalar("between_var"), "block_var": part.scalar("block_var"),
            "between_source": part.between_source, "level": part.components[0].level,
            "fixed_var": sum(p.scalar("se") ** 2 for p in diff.parts[1:]),
            "one_sided": one_sided}
