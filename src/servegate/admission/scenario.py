"""What one admission replay runs: page/chunk sizes, the prompts, the scheduler path, the mode.

Prompt mixes are defined relative to the chunk size so one mix means the same thing at 2048 and
16384 tokens; their offsets are odd on purpose, so lengths are not page multiples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from servegate.admission.ledger_spec import LedgerSpec, LedgerSpecError
from servegate.core.errors import ServegateError

EXACT_FILL_MODES: tuple[str, ...] = ("off", "on", "forced")
PATHS: tuple[str, ...] = ("radix", "no-radix", "no-radix-ignore-eos")


class ScenarioError(ServegateError, ValueError):
    """A scenario's parameters are invalid; the message names the option."""


@dataclass(frozen=True)
class Prompt:
    """One request: ``length`` tokens, the first ``shared_prefix`` of them shared by its group."""

    length: int
    group: int = -1             # prompts with the same group >= 0 share their first tokens
    shared_prefix: int = 0


@dataclass(frozen=True)
class Scenario:
    page_size: int
    chunk_size: int
    prompts: tuple[Prompt, ...]
    mix: str = "custom"
    radix: bool = True
    ignore_eos: bool = False
    max_prefill_tokens: int | None = None     # None: sglang's default (16384), at least the chunk
    truncation_align_size: int | None = None
    warm_prefixes: tuple[tuple[int, int], ...] = ()   # (group, length) replayed first into the tree
    ledger: LedgerSpec | None = None          # a ledger scenario (tile budget, SWA, mamba, dLLM)

    @property
    def path(self) -> str:
        """Which admission code path runs: radix on/off, and add_one_req_ignore_eos."""
        return ("radix" if self.radix else "no-radix") + ("-ignore-eos" if self.ignore_eos else "")

    @property
    def rem_input_tokens(self) -> int:
        return self.max_prefill_tokens or max(16384, self.chunk_size)

    @property
    def scenario_id(self) -> str:
        parts = [f"p{self.page_size}", f"c{self.chunk_size}", self.mix, self.path]
        if self.truncation_align_size:
            parts.append(f"ta{self.truncation_align_size}")
        if self.max_prefill_tokens:
            parts.append(f"mp{self.max_prefill_tokens}")
        if self.ledger is not None and self.ledger.tag:
            parts.append(self.ledger.tag)
        return "-".join(parts)

    def validate(self) -> None:
        """Reject what the real server would reject, naming the CLI option."""
        if self.page_size < 1:
            raise ScenarioError(f"--page-size must be >= 1, got {self.page_size}")
        if self.chunk_size < 1:
            raise ScenarioError(f"--chunk-size must be >= 1, got {self.chunk_size}")
        if self.chunk_size % self.page_size:
            raise ScenarioError(
                f"--chunk-size {self.chunk_size} must be a multiple of --page-size "
                f"{self.page_size} (sglang rejects it too)")
        if not self.prompts:
            raise ScenarioError("--prompt-lens must name at least one prompt length")
        for prompt in self.prompts:
            if prompt.length < 1:
                raise ScenarioError(f"--prompt-lens: lengths must be >= 1, got {prompt.length}")
        if self.truncation_align_size is not None and self.truncation_align_size < 1:
            raise ScenarioError(
                f"--truncation-align-size must be >= 1, got {self.truncation_align_size}")
        if self.max_prefill_tokens is not None and self.max_prefill_tokens < 1:
            raise ScenarioError(
                f"--max-prefill-tokens must be >= 1, got {self.max_prefill_tokens}")
        if self.ledger is not None:
            try:
                self.ledger.validate()
            except LedgerSpecError as err:
                raise ScenarioError(str(err)) from err

    def describe(self) -> dict[str, object]:
        data = asdict(self)
        data["prompts"] = [p.length for p in self.prompts]
        data["scenario_id"] = self.scenario_id
        data["path"] = self.path
        if self.ledger is None:
            data.pop("ledger")      # the plain matrix's JSON stays as it was
        else:
            data["ledger"] = self.ledger.describe()
        return data


def _one_long(c: int) -> list[Prompt]:
    return [Prompt(2 * c + c // 2 + 37)]


def _many_medium(c: int) -> list[Prompt]:
    return [Prompt(c // 3 + 100 + 7 * i) for i in range(8)]


def _not_page_multiples(c: int) -> list[Prompt]:
    return [Prompt(3 * c // 8 + 1), Prompt(5 * c // 8 - 3), Prompt(7 * c // 16 + 5),
            Prompt(9 * c // 16 + 11), Prompt(c // 5 + 13)]


def _long_and_tiny(c: int) -> list[Prompt]:
    return [Prompt(c + c // 2 + 7), Prompt(3), Prompt(5), Prompt(2 * c + 1), Prompt(1),
            Prompt(17), Prompt(c // 4 + 9)]


def _shared_prefixes(c: int) -> list[Prompt]:
    a, b = c // 2 + 5, c // 4 + 3
    return [Prompt(a + c // 4 + 3, 0, a), Prompt(a + c // 3 + 1, 0, a), Prompt(b + c // 2 + 7, 1, b),
            Prompt(a + c // 8 + 2, 0, a), Prompt(b + 11, 1, b), Prompt(c // 3 + 29)]


def _shared_warm(c: int) -> tuple[tuple[int, int], ...]:
    return ((0, c // 2 + 5), (1, c // 4 + 3))


MIXES: dict[str, Callable[[int], list[Prompt]]] = {
    "one-long": _one_long,
    "many-medium": _many_medium,
    "not-page-multiples": _not_page_multiples,
    "long-and-tiny": _long_and_tiny,
    "shared-prefixes": _shared_prefixes,
}


def mix_scenario(mix: str, page_size: int, chunk_size: int, path: str, **extra: object) -> Scenario:
    """Build the named prompt mix for one (page, chunk, path)."""
    if mix not in MIXES:
        raise ScenarioError(f"unknown prompt mix {mix!r}; known: {', '.join(MIXES)}")
    if path not in PATHS:
        raise ScenarioError(f"path {path!r} is not one of {', '.join(PATHS)}")
    warm = _shared_warm(chunk_size) if mix == "shared-prefixes" else ()
    return Scenario(page_size=page_size, chunk_size=chunk_size,
                    prompts=tuple(MIXES[mix](chunk_size)), mix=mix,
                    radix=path == "radix", ignore_eos=path.endswith("ignore-eos"),
                    warm_prefixes=warm, **extra)  # type: ignore[arg-type]
