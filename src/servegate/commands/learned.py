"""The design a runner's learned profile would run (issue 39 item 3): for each paired gated
check, the cheapest starts x blocks with 80 % power at Holm's strictest level from the profile's
measured levels, priced at the runner's measured speed. ``servegate plan --history`` prints it
beside the TOML design; ``servegate bench`` runs it on a GPU runner whose history store
(``$SERVEGATE_HISTORY``) holds the profile (:func:`run_design`; ``--toml-design`` keeps the
TOML's). A CPU suite is sized in time instead (``[design] min_block_seconds``)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from servegate.config.suites import Suite
from servegate.core import runner_classes
from servegate.core.errors import ServegateError
from servegate.plan.cost import Cell, estimate


def measured_figures(store: Path | None, suite: str, runner_class: str,
                     predicted_point_s: float) -> dict[str, Any] | None:
    """From the runs stored for (suite, class): the median server start (replaces the model
    load) and the median ratio of a measured block to the predicted one (scales serving);
    None when the store has no timed run of the suite on the class."""
    if store is None or not store.is_dir():
        return None
    from servegate.history.store import measured_timings

    runs = measured_timings(store, suite, runner_class)
    starts = [s["seconds"] for r in runs for s in r["timings"].get("server_starts", [])
              if not s.get("failed")]
    ratios = []
    for r in runs:
        blocks = [b["seconds"] for b in r["timings"].get("blocks", [])]
        if blocks and predicted_point_s > 0:
            ratios.append(statistics.fmean(blocks) / predicted_point_s)
    if not starts and not ratios:
        return None
    return {"runs": len(runs), "run_ids": [r["run_id"] for r in runs],
            "model_load_s": round(statistics.median(starts), 1) if starts else None,
            "block_scale": round(statistics.median(ratios), 3) if ratios else None}


def _paired_noise(profile: Any, check: Any) -> dict[str, Any] | None:
    """The profile's on/off interaction and its nights' on - off block level (dof-pooled)."""
    from servegate.history.noise_profile import night_levels
    from servegate.judge.evidence import MissingEvidence, paired_matrices

    prior = profile.interaction("on", "off", check.metric, check.concs)
    var = dof = 0.0
    for night in profile.nights:
        try:
            a, b = paired_matrices(*(night.evidence.logs("", mode, list(check.concs),
                                                          check.metric) for mode in ("on", "off")))
        except MissingEvidence:
            continue
        found = night_levels(a - b)
        night_dof = float(found.block_dof.reshape(-1)[0])
        var, dof = var + float(found.block_var.reshape(-1)[0]) * night_dof, dof + night_dof
    if prior is None or dof <= 0:
        return None
    return {"between_var": prior.var, "block_var": var / dof, "df": prior.dof,
            "source": prior.source}


def learned_design(suite: Suite, cell: Cell, store: Path | None, with_accuracy: bool,
                   scale: float | None, load_s: float | None) -> dict[str, Any] | None:
    """The design the runner's learned profile and measured speed would run (docs/judge.md,
    Blocks sized in time); None without a profile for (class, model, suite)."""
    from servegate.calibration import CLAIM_SIZES, block_design, family
    from servegate.history.profile import profile_from_store
    from servegate.judge import budget

    profile = (profile_from_store(store, cell.runner_class, suite.model.name, suite.name)
               if store is not None and cell.trees == 1 else None)
    if profile is None:
        return None
    checks = family(replace(block_design(suite, cell.runner_class), modes=cell.modes))
    alpha = (1.0 - suite.judge.confidence) / max(len(checks), 1)
    model = estimate(suite, cell, False)
    start_s = model["speed"]["model_load_s"]["value"] if load_s is None else load_s
    round_s = (scale or 1.0) * model["mean_point_seconds"] * len(  # every mode and concurrency
        cell.modes) * len(suite.load.concurrency)
    sized = []
    for check in (c for c in checks if c.kind in ("claim_ttft", "noop_tost")):
        noise = _paired_noise(profile, check)
        if noise is None:
            continue
        distance = (math.log1p(check.floor) if check.kind == "noop_tost"
                    else math.log(1 - check.floor) - math.log(1 - CLAIM_SIZES[0]))
        found = budget.cheapest(noise, budget.target_se(distance, alpha, noise["df"], True),
                                start_s, round_s)
        if found is None:
            return {"starts": None, "source": noise["source"],
                    "why": f"no design up to {budget.MAX_STARTS} starts x {budget.MAX_BLOCKS} "
                           f"blocks gives {check.name} 80 % power"}
        sized.append((found, noise))
    if not sized:
        return None
    plan, noise = max(sized, key=lambda pair: pair[0].seconds)
    toml = suite.effective_design
    design = replace(toml, starts=plan.starts, blocks=plan.blocks, looks=(), max_minutes=None,
                     halves=toml.halves and plan.starts % 2 == 0)
    priced = estimate(replace(suite, design=design), cell, with_accuracy, measured_scale=scale,
                      measured_load_s=load_s)
    return {"starts": plan.starts, "blocks": plan.blocks, "source": noise["source"],
            **{k: priced[k] for k in ("serving_minutes", "wall_minutes", "gpu_minutes")},
            "interaction_log_sd": round(math.sqrt(noise["between_var"]), 5),
            "block_log_sd": round(math.sqrt(noise["block_var"]), 5)}


def run_design(suite: Suite, runner_class: str, modes: tuple[str, ...], with_accuracy: bool,
               store: Path | None) -> tuple[Suite, dict[str, Any] | None]:
    """The suite bench runs with one tree: on a GPU runner class whose history ``store`` holds
    a learned profile, the learned design's starts x blocks (no looks: sized for its power
    without them) in place of the TOML's; the record says which ran and why (run.json
    ``design.learned``). Unchanged on a CPU class, for a suite sized in time, or with no
    profile; a profile no design reaches, or a store that cannot be read, keeps the TOML's and
    says why."""
    design = suite.effective_design
    cls = runner_classes.get(runner_class) if runner_class in runner_classes.REGISTRY else None
    if (store is None or cls is None or cls.arch == "cpu" or cls.emulated
            or design.min_block_seconds is not None or design.max_minutes is not None):
        return suite, None
    cell = Cell(runner_class, modes, "run", 1)
    toml = {"starts": design.starts, "blocks": design.blocks, "looks": list(design.looks)}
    try:
        measured = measured_figures(store, suite.name, runner_class,
                                    estimate(suite, cell, False)["mean_point_seconds"]) or {}
        learned = learned_design(suite, cell, store, with_accuracy, measured.get("block_scale"),
                                 measured.get("model_load_s"))
    except (ServegateError, OSError, ValueError) as err:      # the night still runs
        return suite, {"ran": "toml", "source": str(store), "why": f"not read: {err}",
                       "toml": toml}
    if learned is None:
        return suite, None
    if learned["starts"] is None:
        return suite, {**learned, "ran": "toml", "toml": toml}
    sized = replace(design, starts=learned["starts"], blocks=learned["blocks"], looks=(),
                    halves=design.halves and learned["starts"] % 2 == 0)
    return replace(suite, design=sized), {**learned, "ran": "learned", "toml": toml}


def describe(record: dict[str, Any]) -> str:
    """The console's line for :func:`run_design`'s record."""
    toml = record["toml"]
    if record["ran"] == "toml":
        return (f"design: the TOML's {toml['starts']} start(s) x {toml['blocks']} blocks; "
                f"learned design ({record['source']}): {record['why']}")
    return (f"design from the learned profile ({record['source']}: interaction log-sd "
            f"{record['interaction_log_sd']:g}, block log-sd {record['block_log_sd']:g}): "
            f"{record['starts']} start(s) x {record['blocks']} blocks, serving "
            f"{record['serving_minutes']} min, in place of the TOML's {toml['starts']} start(s) "
            f"x {toml['blocks']} blocks (--toml-design keeps it)")
