"""Synthetic run folders for the judge's tests: run.json written per servegate.core.results.

This is test *data* for the judge (known effects, seeded noise), not a stand-in for sglang: the
judge only ever reads run.json, and these files follow the same schema bench writes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from servegate.core import hardware
from servegate.core.results import RUN_SCHEMA_VERSION, load_run


def _point(mode: str, conc: int, repeat: int, order: int, rng: np.random.Generator, *,
           n_requests: int, ttft_ms: float, tpot_ms: float, request_cv: float,
           run_cv: float, output_len: int, prefill_tokens: list[int]) -> dict[str, Any]:
    run_factor = float(np.exp(rng.normal(0.0, run_cv))) if run_cv else 1.0
    sigma = request_cv
    ttft = ttft_ms * run_factor * np.exp(rng.normal(-sigma**2 / 2, sigma, n_requests))
    tpot = tpot_ms * run_factor * np.exp(rng.normal(-sigma**2 / 2, sigma, n_requests))
    e2e = ttft + tpot * (output_len - 1)
    duration_s = float(e2e.sum()) / conc / 1000.0
    metrics = {
        "mean_ttft_ms": float(ttft.mean()), "median_ttft_ms": float(np.median(ttft)),
        "p99_ttft_ms": float(np.percentile(ttft, 99)),
        "mean_tpot_ms": float(tpot.mean()), "median_tpot_ms": float(np.median(tpot)),
        "mean_itl_ms": float(tpot.mean() * 0.98),
        "mean_e2e_latency_ms": float(e2e.mean()),
        "output_throughput": output_len * n_requests / duration_s,
    }
    return {
        "mode": mode, "concurrency": conc, "repeat": repeat, "order": order,
        "metrics": metrics,
        "requests": {"ttft_ms": ttft.tolist(), "tpot_ms": tpot.tolist(),
                     "e2e_latency_ms": e2e.tolist(), "input_lens": [300] * n_requests,
                     "output_lens": [output_len] * n_requests},
        "alignment": {"chunk_size": 256, "saturated_batches": 3, "aligned_fraction": 0.0,
                      "min_saturated_tokens": 236, "prefill_tokens": list(prefill_tokens)},
        "exact_fill_effective": mode == "forced",
        "files": {"client_jsonl": f"client/{mode}-c{conc}-r{repeat}.jsonl",
                  "server_log": f"server/{mode}-r{repeat}.log"},
    }


def make_run(run_dir: Path, *, runner_class: str = "cpu", model_profile: str = "smollm2-135m",
             suite: str = "synthetic", modes: tuple[str, ...] = ("off", "on"),
             concurrencies: tuple[int, ...] = (2, 4), repeats: int = 1, n_requests: int = 60,
             ttft_ms: float = 100.0, tpot_ms: float = 20.0, request_cv: float = 0.05,
             run_cv: float = 0.0, effect: Callable[[str, int], float] | None = None,
             seed: int = 0, complete: bool = True, error: str | None = None,
             prefill_tokens: dict[str, list[int]] | None = None,
             accuracy: dict[str, dict[str, int]] | None = None,
             paired_accuracy: dict[str, Any] | None = None,
             fingerprint_runner: str | None = None) -> Path:
    """Write ``run_dir/run.json``; ``effect(mode, conc)`` scales that arm's latencies."""
    rng = np.random.default_rng(seed)
    points, order = [], 0
    for repeat in range(repeats):
        for conc in concurrencies:
            for mode in modes:          # interleaved, like bench
                factor = effect(mode, conc) if effect else 1.0
                tokens = (prefill_tokens or {}).get(mode, [256, 256, 236, 256, 44])
                points.append(_point(mode, conc, repeat, order, rng, n_requests=n_requests,
                                     ttft_ms=ttft_ms * factor, tpot_ms=tpot_ms * factor,
                                     request_cv=request_cv, run_cv=run_cv, output_len=16,
                                     prefill_tokens=tokens))
                order += 1
    run: dict[str, Any] = {
        "schema_version": RUN_SCHEMA_VERSION, "suite": suite, "model_profile": model_profile,
        "runner_class": runner_class,
        "fingerprint": {"runner_class": fingerprint_runner or runner_class,
                        "sglang": "0.5.23", "sglang_commit": "abc1234", "host": "testhost",
                        "model": "HuggingFaceTB/SmolLM2-135M-Instruct"},
        "command": ["servegate", "bench", "--suite", suite, "--token", "hf_abcdefghijklmnop"],
        "started_at": "2026-11-30T12:00:00+00:00", "finished_at": "2026-11-30T12:30:00+00:00",
        "complete": complete, "chunk_size": 256, "page_size": 64, "points": points,
    }
    if error:
        run["error"] = error
    if accuracy:
        run["accuracy"] = {m: {"n": v["n"], "correct": v["correct"],
                               "accuracy": v["correct"] / v["n"]} for m, v in accuracy.items()}
    if paired_accuracy:
        run["paired_accuracy"] = paired_accuracy
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(run, indent=1))
    return run_dir


def point_mean(run_dir: Path, mode: str, conc: int, metric: str) -> float:
    """Mean of ``metric`` over the run's points of (mode, concurrency), read from run.json."""
    points = [p for p in json.loads((run_dir / "run.json").read_text())["points"]
              if p["mode"] == mode and p["concurrency"] == conc]
    return sum(p["metrics"][metric] for p in points) / len(points)


def write_gsm8k_records(run_dir: Path, label: str, correct: list[bool], gold: str = "7") -> None:
    """``run_dir/gsm8k/<label>.jsonl``: one record per question id, in the accuracy step's
    format (what the judge pairs head with base, or a run with its baseline, on)."""
    folder = run_dir / "gsm8k"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{label}.jsonl").write_text("".join(
        json.dumps({"id": i, "gold": gold, "correct": c, "output": f"{label} {i}"}) + "\n"
        for i, c in enumerate(correct)))


def stored_baseline(tmp_path: Path, **run_kwargs: Any) -> Path:
    """A synthetic run (``make_run``'s keywords) stored as a baseline where ``compare`` and
    ``update_baselines`` look for one: its path."""
    source = make_run(tmp_path / f"src-{uuid.uuid4().hex[:6]}", n_requests=20, **run_kwargs)
    return store(source, tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json")


# Runs on a hardware (servegate.core.hardware; issue 39): the fingerprint fields the judge matches.


def hardware_fields(family: str = "25", **more: Any) -> dict[str, Any]:
    """A fingerprint's hardware fields with their digest (family 25 model 17: this VM)."""
    fp = {"cpu_vendor": "AuthenticAMD", "cpu_family": family, "cpu_model_number": "17",
          "cpu_stepping": "1", "cpu_model": "AMD EPYC", "cpu_count": 2, "memory_gib": 24,
          "cpu_isa": ["avx2", "avx512f", "avx512_bf16"], "gpu_count": 0, **more}
    return {**fp, "hardware": hardware.digest(fp)}


def on(run_dir: Path, fingerprint: dict[str, Any]) -> Path:
    """The run recorded on that hardware (its fingerprint extended)."""
    raw = json.loads((run_dir / "run.json").read_text())
    raw["fingerprint"].update(fingerprint)
    (run_dir / "run.json").write_text(json.dumps(raw))
    return run_dir


def cpu_run(path: Path, seed: int = 1, **fingerprint: Any) -> Path:
    """A run of the ``cpu`` suite's shape (its baseline: the committed one) on that hardware."""
    return on(make_run(path, suite="cpu", modes=("off", "on", "forced"), concurrencies=(2,),
                       repeats=2, seed=seed), fingerprint or hardware_fields())


def store(run_dir: Path, path: Path) -> Path:
    """``run_dir`` written as a baseline at ``path``."""
    from servegate.judge.baselines import baseline_from_run, write_baseline

    write_baseline(path, baseline_from_run(load_run(run_dir), run_dir))
    return path
