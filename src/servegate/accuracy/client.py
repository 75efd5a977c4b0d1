"""Send GSM8K prompts to a running sglang server: bounded concurrency, greedy, retry on connect.

sglang's native ``POST /generate`` (the prompt verbatim, as SGLang's own GSM8K script; token
counts and ``finish_reason`` in ``meta_info``). Retries only a failed connection; an HTTP error
or malformed body raises, a wrong answer is never retried. aiohttp: sglang depends on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from servegate.core.errors import ServegateError

DEFAULT_STOP = ("Question",)


class GenerationError(ServegateError, RuntimeError):
    """The server answered with an error or a malformed body, or stayed unreachable."""


@dataclass(frozen=True)
class Completion:
    text: str
    latency_s: float                 # client-side, of the successful attempt
    attempts: int
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: Any = None


@dataclass
class GenerateClient:
    base_url: str
    concurrency: int = 8
    max_new_tokens: int = 512
    stop: Sequence[str] = DEFAULT_STOP
    timeout_s: float = 1800.0        # per request; CPU generation of 512 tokens is slow
    retries: int = 3                 # extra attempts after a connection error
    backoff_s: float = 1.0           # doubled after each failed attempt
    _url: str = field(init=False)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        self._url = self.base_url.rstrip("/") + "/generate"

    def payload(self, prompt: str) -> dict[str, Any]:
        return {"text": prompt, "sampling_params": {
            "temperature": 0, "max_new_tokens": self.max_new_tokens, "stop": list(self.stop)}}

    async def _one(self, session: Any, prompt: str) -> Completion:
        import aiohttp

        delay = self.backoff_s
        for attempt in range(1, self.retries + 2):
            start = time.perf_counter()
            try:
                async with session.post(self._url, json=self.payload(prompt)) as response:
                    body = await response.text()
                    latency = time.perf_counter() - start
                    if response.status != 200:
                        raise GenerationError(f"POST {self._url}: HTTP {response.status}: "
                                              f"{body[:300]}")
            except asyncio.TimeoutError as err:
                raise GenerationError(f"POST {self._url}: no answer within {self.timeout_s:g} s "
                                      f"(not retried: the server is up but slow)") from err
            except aiohttp.ClientConnectionError as err:
                if attempt > self.retries:
                    raise GenerationError(f"POST {self._url}: connection failed after "
                                          f"{attempt} attempts: {type(err).__name__}: {err}"
                                          ) from err
                await asyncio.sleep(delay)
                delay *= 2
                continue
            return _parse(self._url, body, latency, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def generate_all(self, prompts: Sequence[str],
                           on_done: Callable[[int, Completion], None] | None = None
                           ) -> list[Completion]:
        """Completions in prompt order; at most ``concurrency`` requests in flight."""
        import aiohttp

        semaphore = asyncio.Semaphore(self.concurrency)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        connector = aiohttp.TCPConnector(limit=self.concurrency)

        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            async def run(index: int, prompt: str) -> Completion:
                async with semaphore:
                    completion = await self._one(session, prompt)
                if on_done is not None:
                    on_done(index, completion)
                return completion

            tasks = [asyncio.ensure_future(run(i, p)) for i, p in enumerate(prompts)]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    def run(self, prompts: Sequence[str],
            on_done: Callable[[int, Completion], None] | None = None) -> list[Completion]:
        """Synchronous entry point (bench calls this from plain code)."""
        return asyncio.run(self.generate_all(prompts, on_done))


def _parse(url: str, body: str, latency: float, attempts: int) -> Completion:
    import json

    try:
        data = json.loads(body)
    except json.JSONDecodeError as err:
        raise GenerationError(f"POST {url}: response is not JSON: {body[:200]!r}") from err
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise GenerationError(f"POST {url}: response field 'text' missing or not a string: "
                              f"{body[:200]!r}")
    meta = data.get("meta_info") if isinstance(data.get("meta_info"), dict) else {}
    return Completion(text=data["text"], latency_s=latency, attempts=attempts,
                      completion_tokens=meta.get("completion_tokens"),
                      prompt_tokens=meta.get("prompt_tokens"),
                      finish_reason=meta.get("finish_reason"))
