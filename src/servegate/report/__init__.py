"""Report stage: verdict.json, summary.md verdict section, junit.xml, plots, pytest-benchmark.

Each writer takes a finished :class:`servegate.judge.command.Judgement` (or the run) and writes
one artefact atomically into the run folder; none of them decides anything.
"""
