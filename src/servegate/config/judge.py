"""The suite's ``[judge]`` table: which metrics are gated, their practical floors, claim sizes.

Every key has a default so a suite without a ``[judge]`` table is still judged; a present but
malformed key is an input error naming the file and the key (never silently replaced).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.config._schema import ConfigError, load_toml
from servegate.core.errors import ServegateError
from servegate.core.metrics import direction
from servegate.core.paths import SUITES_DIR

DEFAULT_METRICS: tuple[str, ...] = (
    "mean_ttft_ms", "median_tpot_ms", "mean_e2e_latency_ms", "output_throughput")
DEFAULT_FLOOR = 0.05


class JudgeConfigError(ConfigError):
    """The suite's ``[judge]`` table is malformed; the message names file and key."""


@dataclass(frozen=True)
class JudgeConfig:
    """Resolved judge settings (suite values over defaults)."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    floors: dict[str, float] = field(default_factory=dict)
    default_floor: float = DEFAULT_FLOOR
    confidence: float = 0.95
    seed: int = 20240611
    # assumed run-to-run (start-level) CV (CPU A/A: 4.5-7.5 %), pooled with the starts' own
    # spread, worth run_to_run_cv_dof degrees of freedom (10: as if measured from 11 starts)
    run_to_run_cv: float = 0.05
    run_to_run_cv_dof: float = 10.0
    # the start level between a live pair's two servers (contention shared); None: run_to_run_cv
    live_pair_cv: float | None = None
    accuracy_floor: float = 0.02           # absolute accuracy drop vs baseline that counts
    # A/B claims judged inside one run; "gated": runner classes whose architecture has the
    # exact-fill gate on (servegate.core.runner_classes), where `on` must show the PR's improvement
    gated_min_ttft_improvement: float = 0.04
    gated_ttft_metric: str = "mean_ttft_ms"
    gated_claim_concurrency: int | None = None   # None: the highest concurrency in the run
    # false: a gated class's TTFT and GSM8K claims are reported, not gated (a smoke suite's
    # small model cannot show the kernel effect); the no-op claims elsewhere still gate
    gated_claims: bool = True
    noop_margin: float = 0.05
    # the no-op TOST gates only with at least this power on identical arms (else reported)
    noop_min_power: float = 0.8
    noop_metrics: tuple[str, ...] | None = None  # None: same as metrics
    accuracy_noninferiority_margin: float = 0.02
    experiment_metrics: tuple[str, ...] | None = None  # forced-vs-off; None: same as metrics
    # The primary (gated) family, by selector (servegate.judge.block_checks.FAMILY_SELECTORS):
    # empty = every counted check gates, Bonferroni-corrected (the design before families).
    family: tuple[str, ...] = ()
    family_method: str = "holm"
    # the metrics of the aggregate checks (geometric mean over concurrencies, per mode)
    aggregate_metrics: tuple[str, ...] = ("mean_ttft_ms", "median_tpot_ms")
    # per aggregate metric, the concurrencies its geometric mean covers (absent: all measured);
    # a decode metric leaves out prefill-shaped points, whose few output tokens time prefill
    aggregate_concurrency: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # prior for the start x mode interaction (the start noise that does not cancel between two
    # modes of one server)
    interaction_cv: float = 0.01
    interaction_cv_dof: float = 10.0
    source: str = "<defaults>"
    deprecations: tuple[str, ...] = ()     # old key names read, for a note in the verdict

    def aggregate_concs(self, metric: str, concs: list[int]) -> list[int]:
        """The concurrencies of ``concs`` that the ``metric`` aggregate covers."""
        chosen = self.aggregate_concurrency.get(metric)
        return [c for c in concs if chosen is None or c in chosen]

    def floor(self, metric: str) -> float:
        """Practical floor (relative change) for ``metric``."""
        return float(self.floors.get(metric, self.default_floor))

    @property
    def pair_cv(self) -> float:
        """The start-level CV a live pair's head vs base keeps (twice, one per server)."""
        return self.run_to_run_cv if self.live_pair_cv is None else self.live_pair_cv


_FLOAT_FRACTION = ("default_floor", "accuracy_floor", "run_to_run_cv", "gated_min_ttft_improvement",
                   "noop_margin", "accuracy_noninferiority_margin", "noop_min_power",
                   "interaction_cv", "live_pair_cv")
FAMILY_SELECTORS = ("claims", "baseline-aggregate", "ab-aggregate")
FAMILY_METHODS = ("holm", "bonferroni")


def _metric_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise JudgeConfigError(f"{where}: expected a non-empty list of metric names, got {value!r}")
    return tuple(value)


_TOP_KEYS = ("metrics", "floors", "default_floor", "confidence", "bootstrap_resamples", "seed",
             "min_repeats_for_repeat_bootstrap", "accuracy_floor", "run_to_run_cv",
             "run_to_run_cv_dof", "claims", "family", "family_method", "aggregate_metrics",
             "interaction_cv", "interaction_cv_dof", "aggregate_concurrency", "live_pair_cv")
# Keys of the request-level judge retired with it (issue 30): read, ignored, named as such.
RETIRED_KEYS = ("bootstrap_resamples", "min_repeats_for_repeat_bootstrap")
_CLAIM_KEYS = ("gated_min_ttft_improvement", "gated_ttft_metric", "gated_claim_concurrency",
               "gated_claims", "noop_margin", "noop_metrics", "noop_min_power",
               "accuracy_noninferiority_margin", "experiment_metrics")
# Claim keys were named after gfx95 before runner classes had a registry; still read.
DEPRECATED_CLAIM_KEYS = {f"gfx95_{k[len('gated_'):]}": k for k in _CLAIM_KEYS
                         if k.startswith("gated_")}


def _concurrencies(value: Any, where: str) -> tuple[int, ...]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        raise JudgeConfigError(f"{where}: expected a non-empty list of concurrencies (positive "
                               f"integers), got {value!r}")
    return tuple(value)


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise JudgeConfigError(f"{where}: expected a fraction in [0, 1), got {value!r}")
    return float(value)


def _integer(value: Any, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise JudgeConfigError(f"{where}: expected an integer >= {low}, got {value!r}")
    return value


def _parse_value(key: str, value: Any, where: str) -> Any:
    if key in ("metrics", "noop_metrics", "experiment_metrics", "aggregate_metrics"):
        return _metric_list(value, where)
    if key == "gated_claims":
        if not isinstance(value, bool):
            raise JudgeConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if key == "aggregate_concurrency":
        if not isinstance(value, dict):
            raise JudgeConfigError(f"{where}: expected a table metric -> list of concurrencies")
        return {metric: _concurrencies(concs, f"{where}.{metric}")
                for metric, concs in value.items()}
    if key == "family":
        if not isinstance(value, list) or not all(v in FAMILY_SELECTORS for v in value):
            raise JudgeConfigError(f"{where}: expected a list of {', '.join(FAMILY_SELECTORS)}, "
                                   f"got {value!r}")
        return tuple(value)
    if key == "family_method":
        if value not in FAMILY_METHODS:
            raise JudgeConfigError(f"{where}: expected one of {', '.join(FAMILY_METHODS)}, "
                                   f"got {value!r}")
        return value
    if key == "floors":
        if not isinstance(value, dict):
            raise JudgeConfigError(f"{where}: expected a table metric -> fraction")
        return {metric: _fraction(floor, f"{where}.{metric}") for metric, floor in value.items()}
    if key in _FLOAT_FRACTION:
        return _fraction(value, where)
    if key in ("run_to_run_cv_dof", "interaction_cv_dof"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise JudgeConfigError(f"{where}: expected a number of degrees of freedom >= 0, "
                                   f"got {value!r}")
        return float(value)
    if key == "confidence":
        if isinstance(value, bool) or not isinstance(value, float) or not 0.5 <= value < 1:
            raise JudgeConfigError(f"{where}: expected a float in [0.5, 1), got {value!r}")
        return value
    if key in ("seed", "gated_claim_concurrency"):
        return _integer(value, where, 0 if key == "seed" else 1)
    if key == "gated_ttft_metric":
        if not isinstance(value, str) or "ttft" not in value:
            raise JudgeConfigError(f"{where}: expected a TTFT metric name, got {value!r}")
        return value
    raise AssertionError(key)  # pragma: no cover - keys are checked before


def parse_judge_table(table: dict[str, Any], source: str) -> JudgeConfig:
    """Validate a parsed ``[judge]`` table into a :class:`JudgeConfig`; ``metrics`` defaults to
    ``floors``' keys (floored metrics are gated), else :data:`DEFAULT_METRICS`."""
    values: dict[str, Any] = {"source": source}
    deprecated: list[str] = []
    for key, value in table.items():
        where = f"{source}: [judge].{key}"
        if key not in _TOP_KEYS:
            raise JudgeConfigError(f"{where}: unknown key (known: {', '.join(_TOP_KEYS)})")
        if key == "claims":
            if value == []:          # placeholder written before the claims table existed
                continue
            if not isinstance(value, dict):
                raise JudgeConfigError(f"{where}: expected a table ([judge.claims]) with keys "
                                       f"{', '.join(_CLAIM_KEYS)}, got {value!r}")
            for ckey, cvalue in value.items():
                cwhere = f"{source}: [judge.claims].{ckey}"
                if ckey in DEPRECATED_CLAIM_KEYS:
                    deprecated.append(f"{cwhere}: deprecated name, read as "
                                      f"{DEPRECATED_CLAIM_KEYS[ckey]}")
                    ckey = DEPRECATED_CLAIM_KEYS[ckey]
                if ckey not in _CLAIM_KEYS:
                    raise JudgeConfigError(
                        f"{cwhere}: unknown key (known: {', '.join(_CLAIM_KEYS)})")
                values[ckey] = _parse_value(ckey, cvalue, cwhere)
            continue
        if key in RETIRED_KEYS:
            deprecated.append(f"{where}: retired with the request-level judge (every run is "
                              "judged on blocks); ignored")
            continue
        values[key] = _parse_value(key, value, where)
    if "metrics" not in values and values.get("floors"):
        values["metrics"] = tuple(values["floors"])
    config = JudgeConfig(**values, deprecations=tuple(deprecated))
    for metric in config.aggregate_concurrency:
        if metric not in config.aggregate_metrics:
            raise JudgeConfigError(f"{source}: [judge].aggregate_concurrency.{metric}: not one of "
                                   f"[judge].aggregate_metrics {list(config.aggregate_metrics)}")
    for metric in (*config.metrics, *(config.noop_metrics or ()), *config.aggregate_metrics,
                   *(config.experiment_metrics or ()), *config.floors):
        try:
            direction(metric)
        except ValueError as err:
            raise JudgeConfigError(f"{source}: [judge]: {err}") from err
    return config


def load_judge_table(path: Path) -> JudgeConfig:
    """The ``[judge]`` table of one suite file; defaults when the file or the table is absent."""
    path = Path(path)
    if not path.is_file():
        return JudgeConfig(source=f"<defaults: {path} not found>")
    table = load_toml(path).get("judge")
    if table is None:
        return JudgeConfig(source=f"<defaults: {path} has no [judge] table>")
    if not isinstance(table, dict):
        raise JudgeConfigError(f"{path}: [judge] must be a table")
    return parse_judge_table(table, str(path))


def gated_floors(suite: str, suites_dir: Path = SUITES_DIR) -> tuple[dict[str, float], str]:
    """The metrics ``suites/<suite>.toml``'s ``[judge]`` gates with their floors (defaults when
    the file or table is absent) and ``""``, or ``({}, why)`` when it does not parse: for readers
    that know a run only by its suite's name (the history's noise budget and site)."""
    try:
        config = load_judge_table(Path(suites_dir) / f"{suite}.toml")
    except (ServegateError, ValueError, OSError) as err:
        return {}, f"no floors: {err}"
    return {metric: config.floor(metric) for metric in config.metrics}, ""
