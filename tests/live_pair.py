"""What every live pair (``servegate ab``, a bisect's served step) must show in its run folder,
whatever its verdict: the test helper of ``test_ab_e2e.py`` and ``test_bisect_e2e.py``."""

from __future__ import annotations

from pathlib import Path


def assert_live_pair(run: dict, run_dir: Path) -> None:
    """One start per tree, both servers alive together (their blocks interleave), the blocks
    in base/head pairs, the idle server verified idle during every block of the other, and
    every look the design has taken up to where the pair stopped (or all, run to the end)."""
    design = run["design"]
    assert design["in_server"] is True and design["live_pair"] is True, design
    assert design["devices"] == []                          # a CPU: no device sets
    logs = sorted(p.name for p in (run_dir / "server").glob("*.log")
                  if ".attempt" not in p.name)       # a port retry keeps its failed attempt
    assert logs == ["base-s0.log", "head-s0.log"], logs
    points = run["points"]
    arms = [p["arm"] for p in sorted(points, key=lambda p: p["order"])]
    assert all(a != b for a, b in zip(arms[0::2], arms[1::2], strict=True)), arms  # pairs
    blocks = run.get("sequential", {}).get("stopped_at_blocks") or design["blocks"]
    assert sorted(p["block"] for p in points) == sorted(2 * list(range(blocks)))
    for point in points:                        # the other server idle during every block
        other = "head-s0" if point["arm"] == "base" else "base-s0"
        assert point["idle_check"] == {other: 0}, point
    for arm in ("base", "head"):                # both alive together: blocks of each arm
        mine = [p["order"] for p in points if p["arm"] == arm]      # run between the other's
        theirs = [p["order"] for p in points if p["arm"] != arm]
        assert min(theirs) < max(mine) and min(mine) < max(theirs)
    assert sum(1 for _ in design["start_seconds"]) == 2
    assert sorted(arms) == ["base"] * blocks + ["head"] * blocks
    looks = [k for k in design["looks"] if k < design["blocks"]]
    assert [t["blocks"] for t in run["sequential"]["taken"]] == [k for k in looks if k <= blocks]
