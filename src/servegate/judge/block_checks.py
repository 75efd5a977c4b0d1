"""Checks judged on blocks, for runs whose modes share their server starts (``[design]``): every
check reads the one evidence table and a nested estimate (modes paired within starts, or two
sittings / trees as independent means); ``[judge] family`` picks the gated ones (docs/judge.md,
How a check is decided)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from servegate.config.judge import FAMILY_SELECTORS, JudgeConfig
from servegate.core.results import Run
from servegate.core.runner_classes import REGISTRY
from servegate.judge.ab import arm_view
from servegate.judge.accuracy_checks import accuracy_claim, claim_name
from servegate.judge.alignment import aligned_beyond_off
from servegate.judge.checks import Check
from servegate.judge.evidence import (
    Evidence,
    MissingEvidence,
    as_matrix,
    paired_matrices,
    point_slot,
)
from servegate.judge.nested import (
    Difference,
    design_se,
    independent_difference,
    paired_difference,
)
from servegate.judge.noise_notes import noise_note, noise_record
from servegate.judge.pending import Pending, fixed
from servegate.judge.priors import LevelPrior, PriorSource, choose
from servegate.judge.stats import (
    Interval,
    direction,
    equivalence,
    improvement,
    interval_from_log,
    resolution,
    tost_confidence,
    tost_power,
    verdict,
)

CLAIMS, BASELINE_AGGREGATE, AB_AGGREGATE = FAMILY_SELECTORS


def _interval(diff: Difference, confidence: float) -> Interval:
    """A ratio interval from a nested difference (its noise components kept for the budget)."""
    theta, se, df = diff.scalar("theta"), diff.scalar("se"), diff.scalar("df")
    if not (math.isfinite(theta) and math.isfinite(se)):
        raise MissingEvidence("no standard error from these blocks (one block per side and no "
                              "prior for the level that varies)")
    between = sum(float(c.var.reshape(-1)[0]) for c in diff.components if c.level != "block")
    blocks = [part.starts * part.blocks for part in diff.parts]
    iv = interval_from_log(theta, se, df, confidence, diff.method, blocks[0], blocks[-1],
                           run_var=between)
    return replace(iv, n_starts=diff.parts[0].starts)


def _fill(check: Check, build: Callable[[], Difference], confidence: float,
          one_sided: bool = False) -> Difference | None:
    try:
        diff = build()
        check.interval = _interval(diff, confidence)
        check.noise = noise_record(diff, one_sided)
    except MissingEvidence as err:
        check.verdict, check.reason = "inconclusive", str(err)
        return None
    except ValueError as err:
        check.verdict, check.reason = "error", str(err)
        return None
    return diff


class Judge:
    """The block checks of one run (and its reference), sharing the evidence table."""

    def __init__(self, run: Run, evidence: Evidence, config: JudgeConfig,
                 priors: PriorSource | None = None) -> None:
        self.run, self.evidence, self.config = run, evidence, config
        self.family = set(config.family)
        self.priors = priors

    # -------------------------------------------------------------------- priors

    def interaction_prior(self, mode: str, reference: str, concs: list[int],
                          metric: str) -> LevelPrior:
        """The suite's ``interaction_cv``, or the learned one once it has more dof."""
        cv = self.config.interaction_cv
        stated = LevelPrior(cv * cv, self.config.interaction_cv_dof,
                            f"[judge] interaction_cv in {self.config.source}")
        learned = self.priors.interaction(mode, reference, metric, tuple(concs)) \
            if self.priors is not None else None
        return choose(stated, learned)

    def start_prior(self, mode: str, concs: list[int], metric: str) -> LevelPrior:
        """The suite's ``run_to_run_cv``, or the learned level once worth more dof and no smaller."""
        cv = self.config.run_to_run_cv
        stated = LevelPrior(cv * cv, self.config.run_to_run_cv_dof,
                            f"[judge] run_to_run_cv in {self.config.source}")
        learned = self.priors.start(mode, metric, tuple(concs)) \
            if self.priors is not None else None
        # a night's starts do not see the drift between nights: against another night the
        # learned level may widen the stated one, never narrow it
        if learned is not None and learned.var < stated.var:
            return stated
        return choose(stated, learned)

    def pair_prior(self, mode: str, concs: list[int], metric: str) -> LevelPrior:
        """A live pair's start-level difference: 2 x the suite's ``live_pair_cv``^2 (else
        ``run_to_run_cv``), or what the class's earlier pairs taught once worth more."""
        cv, key = self.config.pair_cv, ("live_pair_cv" if self.config.live_pair_cv is not None
                                        else "run_to_run_cv")
        stated = LevelPrior(2 * cv * cv, self.config.run_to_run_cv_dof,
                            f"2 x [judge] {key}^2 in {self.config.source}")
        return choose(stated, self.priors.pair(mode, metric, tuple(concs))
                      if self.priors is not None else None)

    def prior_for(self, diff: Difference, mode: str, reference: str, concs: list[int],
                  metric: str) -> LevelPrior | None:
        """The prior a difference was judged with (None: a pre-[design] pair of modes, whose
        start-level prior is the suite's doubled run_to_run_cv)."""
        level = diff.parts[0].components[0].level
        if level == "interaction":
            return self.interaction_prior(mode, reference, concs, metric)
        if len(diff.parts) == 2:
            return self.start_prior(mode, concs, metric)
        return self.pair_prior(mode, concs, metric) if self.is_live_pair else None

    def primary(self, selector: str) -> bool:
        return not self.family or selector in self.family

    # -------------------------------------------------------------------- estimates

    def paired(self, arm: str, mode: str, reference: str, concs: list[int],
               metric: str) -> Difference:
        """Two modes of one tree, paired by start and block round: inside shared starts only the
        start x mode interaction remains (``interaction_cv``); runs from before ``[design]`` gave
        each mode its own start, so two start levels stay (2 x ``run_to_run_cv``^2)."""
        cur = self.evidence.logs(arm, mode, concs, metric)
        ref = self.evidence.logs(arm, reference, concs, metric)
        a, b = paired_matrices(cur, ref)
        if not self.evidence.in_server:
            cv = self.config.run_to_run_cv
            return paired_difference(a, b, interaction_var=2 * cv * cv,
                                     interaction_dof=self.config.run_to_run_cv_dof,
                                     level="start")
        prior = self.interaction_prior(mode, reference, concs, metric)
        return paired_difference(a, b, interaction_var=prior.var, interaction_dof=prior.dof)

    def independent(self, current: Evidence, cur_arm: str, reference: Evidence, ref_arm: str,
                    mode: str, concs: list[int], metric: str) -> Difference:
        prior = self.start_prior(mode, concs, metric)
        cur = current.logs(cur_arm, mode, concs, metric)
        ref = reference.logs(ref_arm, mode, concs, metric)
        return independent_difference(as_matrix(cur), as_matrix(ref), start_var=prior.var,
                                      start_dof=prior.dof, halves=(current.halves_of(cur),
                                                                   reference.halves_of(ref)))

    def live_pair(self, mode: str, concs: list[int], metric: str) -> Difference:
        """Head vs base from a live pair: paired per block pair (same start, round and prompts,
        run back to back); the two servers' start levels do not cancel, so their difference
        (:meth:`pair_prior`) stays, measured too with two starts or more (the crossover)."""
        cur = self.evidence.logs("head", mode, concs, metric)
        ref = self.evidence.logs("base", mode, concs, metric)
        a, b = paired_matrices(cur, ref)
        prior = self.pair_prior(mode, concs, metric)
        return paired_difference(a, b, interaction_var=prior.var, interaction_dof=prior.dof,
                                 level="start")

    def _pair_levels(self, mode: str, concs: list[int], metric: str) -> tuple[float, float]:
        """Head's and base's geometric means over the block pairs they share."""
        a, b = paired_matrices(self.evidence.logs("head", mode, concs, metric),
                               self.evidence.logs("base", mode, concs, metric))
        return math.exp(float(np.mean(a))), math.exp(float(np.mean(b)))

    @property
    def is_live_pair(self) -> bool:
        return bool((self.run.get("design") or {}).get("live_pair"))

    def shared_concs(self, arm: str, a: str, b: str) -> list[int]:
        return sorted(set(self.evidence.concurrencies(arm, a)) &
                      set(self.evidence.concurrencies(arm, b)))

    def _aggregate_is(self, metric: str, concs: list[int], conc: int) -> bool:
        """Is ``metric``'s aggregate over ``concs`` the single point at ``conc``?"""
        return (metric in self.config.aggregate_metrics
                and self.config.aggregate_concs(metric, concs) == [conc])

    # -------------------------------------------------------------------- claims

    @property
    def gate_open(self) -> bool:
        """The tree's gate on the run's class as bench read it (run.json ``gate_open``; open: ``on``
        is claimed to improve, closed: a no-op); older runs: the registry's ``gated``."""
        recorded = self.run.get("gate_open")
        if recorded is not None:
            return bool(recorded)
        runner = str(self.run.get("runner_class") or "")
        return runner in REGISTRY and REGISTRY[runner].gated

    def claims(self, arm: str = "") -> list[Pending]:
        pendings: list[Pending] = []
        concs = self.shared_concs(arm, "on", "off")
        if self.gate_open:
            gating = self.config.gated_claims
            if concs:
                claim_conc = self.config.gated_claim_concurrency or concs[-1]
                if claim_conc not in concs and gating:
                    pendings.append(self._missing_claim(claim_conc, concs))
                for conc in concs:
                    pendings.append(self._ttft_claim(arm, conc,
                                                     primary=gating and conc == claim_conc))
                pendings.append(Pending(
                    claim_name(self.config), True,
                    lambda c: accuracy_claim(self.run, self.config, tost_confidence(c)),
                    primary=gating and self.primary(CLAIMS), one_sided=True))
        elif concs:
            pendings.append(self._prefill_pooled(arm, concs))
            for metric in self.config.aggregate_metrics:
                if covered := self.config.aggregate_concs(metric, concs):
                    pendings.append(self._noop(arm, covered, metric,
                                               primary=self.primary(CLAIMS)))
            for conc in concs:
                for metric in self.config.noop_metrics or self.config.metrics:
                    if self._aggregate_is(metric, concs, conc):
                        continue            # the aggregate over one concurrency is this check
                    pendings.append(self._noop(arm, [conc], metric, primary=False))
        for conc in self.shared_concs(arm, "forced", "off"):
            for metric in self.config.experiment_metrics or self.config.metrics:
                pendings.append(self._experiment(arm, conc, metric))
        return pendings

    def _missing_claim(self, conc: int, concs: list[int]) -> Pending:
        """The suite names a claim concurrency the run did not measure: an error that gates."""
        metric = self.config.gated_ttft_metric
        check = Check("claim", f"claim: on vs off {metric} at c{conc}", metric, "error",
                      mode="on", concurrency=conc, reference="off", claim="improvement",
                      reason=f"run has no on and off blocks at concurrency {conc} (measured: "
                             f"{concs})")
        return Pending(check.name, True, lambda _c: check, primary=self.primary(CLAIMS))

    def _ttft_claim(self, arm: str, conc: int, primary: bool) -> Pending:
        metric, required = self.config.gated_ttft_metric, self.config.gated_min_ttft_improvement
        target = 1.0 - required
        kind = "claim" if primary else "experiment"
        name = (f"claim: on vs off {metric} at c{conc} improves >= {100 * required:.1f}%"
                if primary else f"effect: on vs off {metric} at c{conc} (claim size "
                                f"{100 * required:.1f}%, reported)")

        def evaluate(confidence: float) -> Check:
            check = Check(kind, name, metric, "inconclusive", mode="on", concurrency=conc,
                          reference="off", floor=required, boundaries=(target,),
                          claim="improvement" if primary else None)
            level = tost_confidence(confidence)        # one-sided at the family level
            diff = _fill(check, lambda: self.paired(arm, "on", "off", [conc], metric), level,
                         one_sided=True)
            if diff is None:
                return check
            assert check.interval is not None
            check.verdict = improvement(check.interval, target)
            check.reason = {
                "pass": f"whole one-sided interval at or below {target:.3f}",
                "regression": "improvement demonstrably smaller than the stated "
                              f"{100 * required:.1f}%",
            }.get(check.verdict, f"interval straddles the stated ratio {target:.3f}")
            check.reason += "; " + noise_note(diff, self.prior_for(diff, "on", "off", [conc],
                                                                    metric), check)
            return check

        return Pending(name, True, evaluate, primary=primary and self.primary(CLAIMS),
                       one_sided=True)

    def _prefill_pooled(self, arm: str, concs: list[int]) -> Pending:
        """The no-op at the server level: exact fill read back inactive in every ``on`` block,
        and ``on``'s saturated batches not aligned at the chunk more often than ``off``'s
        (one-sided Fisher exact test over every concurrency)."""
        name = "no-op: on prefill batches not aligned beyond off (exact fill inactive)"
        points = [p for p in self.run.get("points", []) if p.get("arm", "") == arm]
        on = [p for p in points if p["mode"] == "on" and p["concurrency"] in concs]
        off = [p for p in points if p["mode"] == "off" and p["concurrency"] in concs]

        def evaluate(confidence: float) -> Check:
            check = Check("claim", name, "aligned_fraction", "pass", mode="on",
                          reference="off", claim="noop-prefill")
            effective = sorted({(p["concurrency"], *point_slot(p))   # (conc, start, block)
                                for p in on if p.get("exact_fill_effective")})
            if effective:
                check.verdict, check.p_value = "regression", 0.0
                check.reason = f"exact fill read back effective in on blocks {effective}"
                return check
            return aligned_beyond_off(check, on, off, confidence)

        return Pending(name, True, evaluate, primary=self.primary(CLAIMS))

    def _noop(self, arm: str, concs: list[int], metric: str, primary: bool) -> Pending:
        margin = self.config.noop_margin
        where = "all concurrencies (geometric mean)" if len(concs) > 1 else f"c{concs[0]}"
        name = f"no-op: on {metric} at {where} equivalent to off within ±{100 * margin:.1f}%"

        def evaluate(confidence: float) -> Check:
            check = Check("claim", name, metric, "inconclusive", mode="on",
                          concurrency=concs[0] if len(concs) == 1 else None, reference="off",
                          floor=margin, boundaries=(1.0 - margin, 1.0 + margin), claim="noop")
            level = tost_confidence(confidence)
            diff = _fill(check, lambda: self.paired(arm, "on", "off", concs, metric), level,
                         one_sided=True)
            if diff is None:
                return check
            iv = check.interval
            assert iv is not None
            check.verdict = equivalence(iv, margin)
            paired = ("blocks paired within starts" if self.evidence.in_server
                      else "each mode in its own starts, paired by start")
            check.reason = f"TOST equivalence, {paired}" + (
                ": demonstrably outside the margin" if check.verdict == "regression" else "")
            power = float(tost_power(iv.standard_error(), iv.df, level, margin))
            if power < self.config.noop_min_power:
                check.gate = False
                check.reason += (f"; reported, not gating: TOST power {100 * power:.0f}% < "
                                 f"{100 * self.config.noop_min_power:.0f}% at "
                                 f"+-{100 * margin:.1f}%")
            else:
                check.reason += f"; TOST power {100 * power:.0f}%"
            check.reason += "; " + noise_note(diff, self.prior_for(diff, "on", "off", concs,
                                                                    metric), check)
            return check

        return Pending(name, True, evaluate, primary=primary, one_sided=True)

    def _experiment(self, arm: str, conc: int, metric: str) -> Pending:
        name = f"experiment: forced@c{conc} {metric} vs off"

        def evaluate(confidence: float) -> Check:
            floor = self.config.floor(metric)
            check = Check("experiment", name, metric, "inconclusive", gate=False,
                          mode="forced", concurrency=conc, reference="off", floor=floor)
            diff = _fill(check, lambda: self.paired(arm, "forced", "off", [conc], metric),
                         confidence)
            if diff is not None:
                assert check.interval is not None
                check.verdict = verdict(check.interval, direction(metric), floor)
                check.reason = noise_note(diff, self.prior_for(diff, "forced", "off", [conc],
                                                               metric), check)
            return check

        return Pending(name, False, evaluate)      # not counted: never in the family

    # -------------------------------------------------------------------- references

    def versus(self, reference: Evidence, *, arm: str = "", ref_arm: str = "",
               kind: str = "baseline", label: str = "baseline",
               selector: str = BASELINE_AGGREGATE) -> list[Pending]:
        """Per point and metric (reported) and per mode the aggregate over concurrencies
        (primary under ``selector``), current against ``reference``."""
        pendings: list[Pending] = []
        # a mode the run did not measure (``--modes``) is not judged against a baseline; both
        # trees of a head-vs-base run measure the same modes, so a mode one lacks is an error
        modes = set(self.evidence.modes(arm))
        if kind == "ab":
            modes |= set(reference.modes(ref_arm))
        for mode in sorted(modes):
            cur_concs = set(self.evidence.concurrencies(arm, mode))
            ref_concs = set(reference.concurrencies(ref_arm, mode))
            # head vs base: a point either tree lacks is an error, never a silent skip
            missing = (ref_concs ^ cur_concs) if kind == "ab" else (ref_concs - cur_concs)
            for conc in sorted(missing):
                if kind == "ab":
                    check = Check("integrity", f"{mode}@c{conc} measured on both trees",
                                  "points", "error", mode=mode, concurrency=conc,
                                  reason=f"point missing from the "
                                         f"{arm if conc not in cur_concs else ref_arm} tree")
                else:
                    check = Check("integrity", f"{mode}@c{conc} present in run", "points",
                                  "error", mode=mode, concurrency=conc,
                                  reason=f"point is in the {label} but missing from the run")
                pendings.append(fixed(check))
            if kind != "ab":
                for conc in sorted(cur_concs - ref_concs):
                    pendings.append(fixed(Check(
                        "baseline", f"{mode}@c{conc} vs {label}", "points", "inconclusive",
                        gate=False, mode=mode, concurrency=conc, reference=label,
                        reason=f"new point: not in the {label} (update baselines to gate it)")))
            shared = sorted(cur_concs & ref_concs)
            for metric in self.config.aggregate_metrics:
                covered = self.config.aggregate_concs(metric, shared)
                # a metric a baseline lacks is not judged; a tree lacking it is inconclusive
                if covered and (kind == "ab" or all(reference.slots(ref_arm, mode, c, metric)
                                                    for c in covered)):
                    pendings.append(self._versus(reference, arm, ref_arm, mode, covered, metric,
                                                 kind, label, self.primary(selector)))
            for conc in shared:
                for metric in self.config.metrics:
                    if kind != "ab" and not reference.slots(ref_arm, mode, conc, metric):
                        continue
                    if self._aggregate_is(metric, shared, conc):
                        continue            # the aggregate over one concurrency is this check
                    pendings.append(self._versus(reference, arm, ref_arm, mode, [conc], metric,
                                                 kind, label, False))
        return pendings

    def _versus(self, reference: Evidence, arm: str, ref_arm: str, mode: str,
                concs: list[int], metric: str, kind: str, label: str,
                primary: bool) -> Pending:
        many = len(concs) > 1
        where = "all concurrencies (geometric mean)" if many else f"c{concs[0]}"
        name = (f"{mode} {metric} at {where} vs {label}" if many
                else f"{mode}@c{concs[0]} {metric} vs {label}")
        floor = self.config.floor(metric)

        def evaluate(confidence: float) -> Check:
            check = Check(kind, name, metric, "inconclusive", mode=mode,  # type: ignore[arg-type]
                          concurrency=None if many else concs[0], reference=label, floor=floor)
            if kind == "ab" and self.is_live_pair:
                diff = _fill(check, lambda: self.live_pair(mode, concs, metric), confidence)
            else:
                diff = _fill(check, lambda: self.independent(
                    self.evidence, arm, reference, ref_arm, mode, concs, metric), confidence)
            if diff is None:
                return check
            assert check.interval is not None
            if len(diff.parts) == 2:            # two nested means
                check.current_value = math.exp(diff.parts[0].scalar("theta"))
                check.reference_value = math.exp(diff.parts[1].scalar("theta"))
            else:                               # a live pair: one estimate of the pairs
                check.current_value, check.reference_value = self._pair_levels(mode, concs, metric)
            prior = self.prior_for(diff, mode, mode, concs, metric)
            if primary and prior is not None:       # a gated one-night check
                check.resolution = float(np.ravel(resolution(
                    design_se(diff, prior.var, prior.dof), diff.df, confidence, floor))[0])
            check.verdict = verdict(check.interval, direction(metric), floor, check.resolution)
            check.reason = noise_note(diff, prior, check)
            if check.by_resolution:
                check.reason = (f"no regression > {100 * (check.resolution or 0.0):.1f}% (this "
                                f"design's resolution; smaller: the sustained rule); {check.reason}")
            return check

        return Pending(name, True, evaluate, primary=primary)


def block_pendings(run: Run, evidence: Evidence, config: JudgeConfig, *,
                   baseline: Evidence | None = None, extra: list[Pending] | None = None,
                   priors: PriorSource | None = None) -> list[Pending]:
    """Every block check of a run: head vs base (when it is one), baseline, claims
    (``priors``: a learned noise profile that may replace the suite's figures)."""
    judge = Judge(run, evidence, config, priors)
    if run.get("ab"):
        pendings = (judge.versus(evidence, arm="head", ref_arm="base", kind="ab", label="base",
                                 selector=AB_AGGREGATE)
                    + Judge(arm_view(run, "head"), evidence, config, priors).claims("head"))
    else:
        pendings = (judge.versus(baseline) if baseline is not None else []) + judge.claims("")
    return pendings + list(extra or [])

