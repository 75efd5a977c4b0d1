"""One GSM8K pass against a running server for one mode: prompts -> completions -> records.

Called by ``servegate.commands.bench`` after a mode's server is healthy; the returned dict is stored in
run.json under ``accuracy[mode]`` (``results.AccuracyResult`` plus shot/latency provenance).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from servegate.accuracy import dataset as ds
from servegate.accuracy.client import Completion, GenerateClient
from servegate.accuracy.extract import extract_flexible, extract_strict, is_correct
from servegate.accuracy.paired import wilson
from servegate.accuracy.prompts import build_prefix, build_prompt, select_shots
from servegate.config.gsm8k import AccuracyConfigError, GSM8KSettings
from servegate.core.atomic import write_text

RECORDS_DIR = "gsm8k"


def _progress(total: int, mode: str) -> Any:
    """A stderr line every 10 % of questions (CI logs stay short, a long CPU run shows life)."""
    step = max(1, total // 10)
    done = [0]

    def on_done(_index: int, _completion: Completion) -> None:
        done[0] += 1
        if done[0] % step == 0 or done[0] == total:
            print(f"gsm8k[{mode}]: {done[0]}/{total}", file=sys.stderr, flush=True)

    return on_done


def run_gsm8k(base_url: str, mode: str, run_dir: Path, config: GSM8KSettings) -> dict:
    """Evaluate GSM8K against the server at ``base_url``; write ``gsm8k/<mode>.jsonl``.

    Raises ``AccuracyConfigError`` / ``DatasetError`` on bad input and ``GenerationError`` when
    the server fails (bench maps both to exit code 2). Returns an AccuracyResult dict.
    """
    evaluated = ds.load_gsm8k(config.source, "test")
    rows = evaluated.rows[: config.questions] if config.questions else evaluated.rows
    if config.questions and config.questions > len(evaluated.rows):
        raise AccuracyConfigError(f"[gsm8k].questions: {config.questions} but "
                                  f"{evaluated.source} has {len(evaluated.rows)}")
    train_spec = config.train_dataset or (
        config.source if config.source in ds.SOURCES else ds.sibling_train(evaluated.source))
    if train_spec is None:
        raise AccuracyConfigError(f"[gsm8k].train_dataset: needed (no train.jsonl beside "
                                  f"{evaluated.source}); shots must come from the train split")
    train = ds.load_gsm8k(train_spec, "train")
    # Exclude the whole evaluated split, not just the first N, so growing N never overlaps.
    shots = select_shots(train.rows, config.shots, config.seed, evaluated.rows)
    prefix = build_prefix(shots)
    prompts = [build_prompt(prefix, row.question) for row in rows]

    client = GenerateClient(base_url, concurrency=config.concurrency,
                            max_new_tokens=config.max_tokens)
    start = time.perf_counter()
    completions = client.run(prompts, _progress(len(prompts), mode))
    duration = time.perf_counter() - start

    records = []
    for row, completion in zip(rows, completions, strict=True):
        strict, flexible = extract_strict(completion.text), extract_flexible(completion.text)
        predicted = strict if config.extraction == "strict" else flexible
        records.append({
            "id": row.index, "gold": row.gold, "predicted": predicted,
            "correct": is_correct(predicted, row.gold), "output": completion.text,
            "strict": strict, "flexible": flexible,
            "strict_correct": is_correct(strict, row.gold),
            "flexible_correct": is_correct(flexible, row.gold),
            "latency_s": round(completion.latency_s, 4),
            "completion_tokens": completion.completion_tokens,
            "finish_reason": completion.finish_reason, "attempts": completion.attempts,
        })
    relative = f"{RECORDS_DIR}/{mode}.jsonl"
    write_text(Path(run_dir) / relative,
               "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return summarize(records, config, relative, evaluated, train, [r.index for r in shots],
                     duration)


def summarize(records: list[dict[str, Any]], config: GSM8KSettings, relative: str,
              evaluated: ds.GSM8K, train: ds.GSM8K, shot_ids: list[int],
              duration: float) -> dict[str, Any]:
    n = len(records)
    correct = sum(r["correct"] for r in records)
    low, high = wilson(correct, n)
    latencies = [r["latency_s"] for r in records]
    tokens = [r["completion_tokens"] for r in records if isinstance(r["completion_tokens"], int)]
    return {
        "n": n, "correct": correct, "accuracy": correct / n,
        "wilson_low": low, "wilson_high": high,
        "invalid": sum(r["predicted"] is None for r in records),
        "truncated": sum(_finish_type(r["finish_reason"]) == "length" for r in records),
        "extraction": config.extraction,
        "strict_accuracy": sum(r["strict_correct"] for r in records) / n,
        "flexible_accuracy": sum(r["flexible_correct"] for r in records) / n,
        "records": relative,
        "dataset": evaluated.source, "dataset_sha256": evaluated.sha256,
        "dataset_content_sha256": evaluated.content_sha256,
        "train_dataset": train.source, "train_dataset_sha256": train.sha256,
        "shots": config.shots, "seed": config.seed, "shot_ids": shot_ids,
        "max_tokens": config.max_tokens, "concurrency": config.concurrency,
        "duration_s": duration,
        "latency_mean_s": statistics.fmean(latencies),
        "latency_median_s": statistics.median(latencies),
        "output_tokens": sum(tokens),
        "output_throughput_tok_s": sum(tokens) / duration if duration > 0 else 0.0,
        "requests_per_s": n / duration if duration > 0 else 0.0,
    }


def _finish_type(reason: Any) -> Any:
    return reason.get("type") if isinstance(reason, dict) else reason
