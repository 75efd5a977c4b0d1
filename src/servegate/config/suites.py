"""Suites (``suites/<name>.toml``): which model, modes, load points, repeats, and the tables the
other stages read, validated here once: ``[gsm8k]`` (:class:`GSM8KSettings`) and ``[judge]``
(:class:`JudgeConfig`). :meth:`Suite.server_for` gives the effective server settings per runner
class (the profile's, with the suite's ``[server]`` overrides applied) - the one place they are
worked out."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from servegate.config._schema import ConfigError, Field, check_table, load_toml
from servegate.config.gsm8k import AccuracyConfigError, GSM8KSettings
from servegate.config.judge import JudgeConfig, parse_judge_table
from servegate.config.profiles import ModelProfile, RunnerProfile, load_profile
from servegate.config.profiling import ProfileSettings, parse_profile_table
from servegate.core import runner_classes as runner_registry
from servegate.core.paths import MODELS_DIR, SUITES_DIR
from servegate.core.results import MODES

_TOP = {
    "suite": Field(dict, required=True),
    "server": Field(dict),
    "load": Field(dict, required=True),
    "gsm8k": Field(dict),
    "judge": Field(dict),
    "design": Field(dict),
    "profile": Field(dict),         # servegate.config.profiling
}
_DESIGN = {"starts": Field(int, required=True), "blocks": Field(int, required=True),
           "warmup_blocks": Field(int), "looks": Field(list, item=int), "halves": Field(bool),
           # sized in time (Design.min_block_seconds / max_minutes)
           "min_block_seconds": Field((int, float)), "max_minutes": Field((int, float)),
           "forced_blocks": Field(int), "spending_power": Field((int, float))}
_SUITE = {
    "name": Field(str, required=True),
    "description": Field(str),
    "model": Field(str, required=True),
    "runners": Field(list, required=True, item=str),
    "modes": Field(list, required=True, item=str),
    "repeats": Field(int),          # required without a [design] table
    "seed": Field(int, required=True),
}
_SERVER = {"chunked_prefill_size": Field(int), "page_size": Field(int), "dtype": Field(str)}
# sglang's --dtype choices (srt/server_args.py, add_cli_args)
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
_LOAD = {
    "input_len": Field(int, required=True),
    "output_len": Field(int, required=True),
    "concurrency": Field(list, required=True, item=int),
    "num_prompts": Field(list, required=True, item=int),
    "warmup_requests": Field(int, required=True),
    "point_timeout_s": Field(int, required=True),
    # the client's --random-range-ratio: lengths uniform in [max(int(len * r), 1), len]
    "range_ratio": Field(float),
    # one output length per concurrency (same order) where points are shaped to their question
    # (e.g. a prefill-shaped TTFT point); output_len stays the full load preflight compares with
    "shaped_output_len": Field(list, item=int),
}
_GSM8K = {  # types here; values checked by GSM8KSettings.parse
    "questions": Field((int, str), required=True),     # a count, or "all"
    "shots": Field(int, required=True),
    "concurrency": Field(int, required=True),
    "max_tokens": Field(int, required=True),
    "source": Field(str),          # "packaged" (default) | "hub" | a jsonl path or directory
    "dataset": Field(str),         # deprecated name of source ("test" = packaged)
    "seed": Field(int, required=True),
    "train_dataset": Field(str),
    "extraction": Field(str),
}


# the client's --dataset-name (servegate.measure.client): token-id prompts, no download
CLIENT_DATASET = "random-ids"


@dataclass(frozen=True)
class Load:
    input_len: int
    output_len: int
    concurrency: tuple[int, ...]
    num_prompts: tuple[int, ...]        # one per concurrency, same order
    warmup_requests: int
    point_timeout_s: int
    range_ratio: float = 1.0            # --random-range-ratio; 1.0: every length exactly as set
    # per concurrency (same order) when the suite shapes its points; empty: output_len everywhere
    shaped_output_len: tuple[int, ...] = ()

    def output_len_at(self, concurrency: int) -> int:
        """The output length the client asks at ``concurrency`` (its shaped length, if any)."""
        if not self.shaped_output_len:
            return self.output_len
        return self.shaped_output_len[self.concurrency.index(concurrency)]

    @property
    def reshaped(self) -> tuple[int, ...]:
        """Concurrencies whose points run a shorter output than the full load's."""
        return tuple(c for c in self.concurrency if self.output_len_at(c) != self.output_len)

    def record(self) -> dict[str, Any]:
        """What run.json's ``load`` says about it: the work each point measured (the history
        keys its lines by it, servegate.history.load)."""
        return {"dataset": CLIENT_DATASET, "input_len": self.input_len,
                "output_len": self.output_len, "concurrency": list(self.concurrency),
                "num_prompts": list(self.num_prompts), "range_ratio": self.range_ratio,
                "shaped_output_len": list(self.shaped_output_len)}


@dataclass(frozen=True)
class Design:
    """``[design]``: ``starts`` server starts, each running every mode (switched in place) for
    ``blocks`` client runs per mode and concurrency. An older suite's ``[suite].repeats`` is
    read as that many starts of one block each. ``in_server`` is false only in run folders
    from before ``[design]`` (a server start per mode and repeat), never in a suite."""

    starts: int
    blocks: int
    in_server: bool = True
    # discarded client runs per mode at its first switch in a start (first-use kernel cost)
    warmup_blocks: int = 0
    # block counts (in the last start) after which the gated family is tested and the run may
    # stop (servegate.judge.sequential); the final look, ``blocks``, is implicit
    looks: tuple[int, ...] = ()
    # two starts at once, one on each half of a runner that holds two servers (start s on
    # half s % 2, rounds of two: servegate.plan.design.build_halves_plan)
    halves: bool = False
    # sized in time: a block lasts at least ``min_block_seconds`` (bench measures this
    # machine's wave and sets the waves per block); ``max_minutes`` of points cap the looks, so
    # blocks are counted by need (servegate.commands.bench_looks)
    min_block_seconds: float | None = None
    max_minutes: float | None = None
    # ``forced`` (an experiment, never gated) only in each start's first rounds
    forced_blocks: int | None = None
    spending_power: float | None = None     # the looks' alpha spending (judge.sequential.spent)

    def counted(self) -> Design:
        """Head vs base's design (servegate ab, bisect: both trees' blocks interleaved): one
        sized in time runs its first look's blocks, unsized and without looks, as before."""
        if self.max_minutes is None and self.min_block_seconds is None:
            return self
        return replace(self, blocks=self.looks[0] if self.looks else self.blocks, looks=(),
                       min_block_seconds=None, max_minutes=None, forced_blocks=None,
                       spending_power=None)

    def record(self) -> dict[str, Any]:
        """What run.json's ``design`` says about it."""
        timed = {k: v for k, v in (("min_block_seconds", self.min_block_seconds),
                                   ("max_minutes", self.max_minutes)) if v is not None}
        extra = {k: v for k, v in (("forced_blocks", self.forced_blocks),
                                   ("spending_power", self.spending_power)) if v}
        return {"in_server": self.in_server, "starts": self.starts, "blocks": self.blocks,
                "warmup_blocks": self.warmup_blocks, "looks": list(self.looks),
                "halves": self.halves, **({"sizing": timed} if timed else {}),
                **extra,
                "unit": "block" if self.in_server else "server start per mode and repeat"}


@dataclass(frozen=True)
class Suite:
    name: str
    source: Path
    model: ModelProfile
    runners: tuple[str, ...]
    modes: tuple[str, ...]
    repeats: int
    seed: int
    load: Load
    server_overrides: dict[str, int | str] = field(default_factory=dict)
    gsm8k: GSM8KSettings | None = None
    gsm8k_table: dict[str, Any] | None = None     # as written (recorded with results)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    judge_table: dict[str, Any] | None = None     # as written (recorded in run.json)
    description: str = ""
    design: Design = field(default_factory=lambda: Design(starts=1, blocks=1))
    notes: tuple[str, ...] = ()                   # how the file was read (e.g. old designs)
    profile: ProfileSettings = field(default_factory=ProfileSettings)   # [profile]

    @property
    def effective_design(self) -> Design:
        """The design bench runs (``[design]``, or the repeats of an older suite as starts)."""
        return self.design

    def runs_on(self, runner_class: str) -> bool:
        """``runners`` lists this class, or its architecture."""
        return any(runner_registry.selects(entry, runner_class) for entry in self.runners)

    def runner_classes(self) -> tuple[str, ...]:
        """Every registered class this suite covers (architectures expand to their models)."""
        return tuple(c.name for c in runner_registry.expand(self.runners))

    def server_for(self, runner_class: str) -> RunnerProfile:
        """The model profile's settings for ``runner_class`` with this suite's ``[server]``
        overrides (chunk size, page size, dtype) applied; a suite's dtype replaces any
        ``--dtype`` in the profile's args."""
        profile = self.model.for_runner(runner_class)
        overrides = self.server_overrides
        args = profile.args
        if "dtype" in overrides:
            args = (*_without_flag(args, "--dtype"), "--dtype", str(overrides["dtype"]))
        page = overrides.get("page_size")
        return replace(profile, chunked_prefill_size=int(overrides.get(
                           "chunked_prefill_size", profile.chunked_prefill_size)),
                       page_size=profile.page_size if page is None else int(page), args=args)


def _without_flag(args: tuple[str, ...], flag: str) -> tuple[str, ...]:
    """``args`` without ``flag`` and its value (``--flag v`` or ``--flag=v``)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(f"{flag}="):
            kept.append(arg)
    return tuple(kept)


def _positive_ints(path: Path, name: str, values: list[int] | tuple[int, ...]) -> None:
    for value in values:
        if value <= 0:
            raise ConfigError(f"{path}: {name}: expected positive integers, got {value}")


def load_suite(path: Path, models_dir: Path | None = None) -> Suite:
    """Load a suite and the model profile it names; errors name the file and the key."""
    path = Path(path)
    data = check_table(path, "", load_toml(path), _TOP)
    head = check_table(path, "suite", data["suite"], _SUITE)
    if head["name"] != path.stem:
        raise ConfigError(f"{path}: suite.name {head['name']!r} must match the file name "
                          f"{path.stem!r}")
    for mode in head["modes"]:
        if mode not in MODES:
            raise ConfigError(f"{path}: suite.modes: {mode!r} is not one of {MODES}")
    if not head["modes"] or len(set(head["modes"])) != len(head["modes"]):
        raise ConfigError(f"{path}: suite.modes: expected a non-empty list without duplicates")
    known = (*runner_registry.ARCHES, *runner_registry.names())
    for runner in head["runners"]:
        if runner not in known:
            raise ConfigError(f"{path}: suite.runners: {runner!r} is not a runner class or "
                              f"architecture ({', '.join(known)})")
    design, notes = _design(path, data, head)
    load = check_table(path, "load", data["load"], _LOAD)
    if len(load["concurrency"]) != len(load["num_prompts"]) or not load["concurrency"]:
        raise ConfigError(f"{path}: load.num_prompts must list one count per load.concurrency "
                          f"entry ({len(load['concurrency'])} concurrencies, "
                          f"{len(load['num_prompts'])} counts)")
    for key in ("concurrency", "num_prompts"):
        _positive_ints(path, f"load.{key}", load[key])
    for key in ("input_len", "output_len", "point_timeout_s"):
        _positive_ints(path, f"load.{key}", [load[key]])
    shaped = tuple(load.get("shaped_output_len", ()))
    if shaped:
        _positive_ints(path, "load.shaped_output_len", shaped)
        if len(shaped) != len(load["concurrency"]):
            raise ConfigError(f"{path}: load.shaped_output_len must list one output length per "
                              f"load.concurrency entry ({len(load['concurrency'])} "
                              f"concurrencies, {len(shaped)} lengths)")
        if any(n > load["output_len"] for n in shaped):
            raise ConfigError(f"{path}: load.shaped_output_len: a shaped point runs at most the "
                              f"full load's load.output_len ({load['output_len']}), got "
                              f"{list(shaped)}")
    if load["warmup_requests"] < 0:
        raise ConfigError(f"{path}: load.warmup_requests: expected >= 0")
    range_ratio = float(load.get("range_ratio", 1.0))
    if not 0.0 <= range_ratio <= 1.0:
        raise ConfigError(f"{path}: load.range_ratio: expected a number in [0, 1] (the client's "
                          f"--random-range-ratio), got {load['range_ratio']!r}")
    server = check_table(path, "server", data.get("server", {}), _SERVER)
    _positive_ints(path, "server", [v for k, v in server.items() if k != "dtype"])
    if server.get("dtype", "auto") not in DTYPES:
        raise ConfigError(f"{path}: server.dtype: expected one of {', '.join(DTYPES)} "
                          f"(sglang's --dtype), got {server['dtype']!r}")
    gsm8k = None
    if "gsm8k" in data:
        gsm8k = dict(check_table(path, "gsm8k", data["gsm8k"], _GSM8K))
        if gsm8k["questions"] != "all" and not isinstance(gsm8k["questions"], int):
            raise ConfigError(f"{path}: gsm8k.questions: expected an integer or \"all\", "
                              f"got {gsm8k['questions']!r}")
        counts = [gsm8k[k] for k in ("questions", "concurrency", "max_tokens")]
        _positive_ints(path, "gsm8k", [c for c in counts if c != "all"])
    try:
        gsm8k_settings = GSM8KSettings.parse(gsm8k) if gsm8k is not None else None
    except AccuracyConfigError as err:
        raise AccuracyConfigError(f"{path}: {err}") from err
    judge_table = data.get("judge")
    if judge_table is not None and not isinstance(judge_table, dict):
        raise ConfigError(f"{path}: [judge]: expected a table")
    judge = (parse_judge_table(judge_table, str(path)) if judge_table is not None
             else JudgeConfig(source=f"<defaults: {path} has no [judge] table>"))
    for metric, concs in judge.aggregate_concurrency.items():
        if not set(concs) <= set(load["concurrency"]):
            raise ConfigError(f"{path}: [judge].aggregate_concurrency.{metric}: {list(concs)} "
                              f"must be concurrencies of load.concurrency "
                              f"{load['concurrency']}")
    profile = load_profile((models_dir or MODELS_DIR) / f"{head['model']}.toml")
    for cls in runner_registry.expand(head["runners"]):
        runner = cls.name
        section = profile.for_runner(runner)   # the class's section, else its architecture's
        chunk = server.get("chunked_prefill_size", section.chunked_prefill_size)
        page = server.get("page_size", section.page_size)
        if page and chunk % page:
            raise ConfigError(f"{path}: chunk size {chunk} is not a multiple of page size {page} "
                              f"for runner {runner!r}")
    return Suite(
        name=head["name"], source=path, model=profile, runners=tuple(head["runners"]),
        modes=tuple(head["modes"]), repeats=1,
        seed=head["seed"],
        load=Load(input_len=load["input_len"], output_len=load["output_len"],
                  concurrency=tuple(load["concurrency"]),
                  num_prompts=tuple(load["num_prompts"]),
                  warmup_requests=load["warmup_requests"],
                  point_timeout_s=load["point_timeout_s"], range_ratio=range_ratio,
                  shaped_output_len=shaped),
        server_overrides=dict(server), gsm8k=gsm8k_settings, gsm8k_table=gsm8k, judge=judge,
        judge_table=judge_table,
        description=head.get("description", ""), design=design, notes=notes,
        profile=parse_profile_table(path, data.get("profile")))


def _design(path: Path, data: dict[str, Any], head: dict[str, Any]
            ) -> tuple[Design, tuple[str, ...]]:
    """``[design]`` (every mode in each start) or the older ``[suite].repeats``, never both."""
    if "design" not in data:
        if "repeats" not in head:
            raise ConfigError(f"{path}: [design] (starts, blocks) or suite.repeats is required")
        _positive_ints(path, "suite.repeats", [head["repeats"]])
        # the design before [design] (a server start per mode and repeat) is retired: its
        # repeats become starts, each running every mode once (one block), modes paired
        return Design(starts=head["repeats"], blocks=1), (
            f"{path}: suite.repeats = {head['repeats']} read as [design] starts = "
            f"{head['repeats']}, blocks = 1 (every mode inside each start); write a [design] "
            "table instead",)
    if "repeats" in head:
        raise ConfigError(f"{path}: suite.repeats and [design] are exclusive: [design] starts "
                          "and blocks replace repeats")
    table = check_table(path, "design", data["design"], _DESIGN)
    _positive_ints(path, "design.starts", [table["starts"]])
    _positive_ints(path, "design.blocks", [table["blocks"]])
    warmup = table.get("warmup_blocks", 0)
    if warmup < 0:
        raise ConfigError(f"{path}: design.warmup_blocks: expected an integer >= 0, got {warmup}")
    looks = tuple(table.get("looks", ()))
    if list(looks) != sorted(set(looks)) or any(k < 2 or k >= table["blocks"] for k in looks):
        raise ConfigError(f"{path}: design.looks: expected increasing block counts, each at "
                          f"least 2 and below design.blocks ({table['blocks']}: the final "
                          f"look), got {list(looks)}")
    halves = table.get("halves", False)
    if halves and (table["starts"] % 2 or looks):
        raise ConfigError(f"{path}: design.halves: expected an even design.starts (a start on "
                          f"each half per round) and no design.looks, got starts = "
                          f"{table['starts']}, looks = {list(looks)}")
    timed = {k: float(table[k]) for k in ("min_block_seconds", "max_minutes") if k in table}
    if any(not 0 < v < 1e6 for v in timed.values()) or (timed and halves) or (
            "max_minutes" in timed and not looks):
        raise ConfigError(f"{path}: design.min_block_seconds / max_minutes: expected positive "
                          "numbers, not with design.halves, and max_minutes with design.looks "
                          f"(the cap is kept at the looks), got {timed}, halves = {halves}, "
                          f"looks = {list(looks)}")
    if "forced_blocks" in table:
        _positive_ints(path, "design.forced_blocks", [table["forced_blocks"]])
    power = table.get("spending_power")
    if power is not None and not (0 < power <= 10 and looks):
        raise ConfigError(f"{path}: design.spending_power: expected a number in (0, 10] with "
                          f"design.looks (alpha t^power spent by a look at fraction t), got "
                          f"{power!r}, looks = {list(looks)}")
    return Design(starts=table["starts"], blocks=table["blocks"], warmup_blocks=warmup,
                  looks=looks, halves=halves, min_block_seconds=timed.get(
                      "min_block_seconds"), max_minutes=timed.get("max_minutes"),
                  forced_blocks=table.get("forced_blocks"), spending_power=power), ()


def suite_path(name_or_path: str) -> Path:
    """``cpu`` -> suites/cpu.toml; an existing path is used as is."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        return candidate
    return SUITES_DIR / f"{name_or_path}.toml"
