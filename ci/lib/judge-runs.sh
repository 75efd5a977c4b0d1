#!/usr/bin/env bash
# Judge every gathered run folder with `servegate compare` and combine the exit codes.
#
# Why: the nightly matrix produces one run folder per (runner, modes) cell; one job must judge
# them all, show one table, and fail the workflow on a regression (exit 1) or a broken cell
# (exit 2) — but not on an inconclusive verdict, and never because of an experiment cell.
# Cells whose folder name contains "-experiment-" (e.g. forced exact fill on gfx942) are judged
# and reported but do not gate.
# Usage: ci/lib/judge-runs.sh GATHERED_DIR
#   GATHERED_DIR holds one sub-folder per cell (as actions/download-artifact lays them out).
#   SERVEGATE_PYTHON selects the interpreter with servegate installed (default python3).
# Exit: 1 if any gating cell regressed; else 2 if a gating cell could not be judged or there was
# no gating cell at all; else 0.
set -euo pipefail

SG_SCRIPT_NAME="judge-runs"  # read by ci/lib/common.sh
# shellcheck source=ci/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    echo "usage: ci/lib/judge-runs.sh GATHERED_DIR"
}

[[ $# -eq 1 ]] || sg_usage_error "expected exactly one argument, got $#"
gathered="$1"
[[ -d "$gathered" ]] || sg_die "$gathered: no such folder (did the download step run?)"
python="${SERVEGATE_PYTHON:-python3}"
# With a history store (SERVEGATE_HISTORY), a cell is judged against its last nights (the
# rolling history:N baseline) once there are enough of them on its load, else against the
# stored baseline;
# every complete run is then added to the store.
store="${SERVEGATE_HISTORY:-}"
nights="${SERVEGATE_HISTORY_NIGHTS:-5}"

describe() {
    case "$1" in
        0) echo "pass" ;;
        1) echo "regression" ;;
        2) echo "infra/input error" ;;
        3) echo "inconclusive" ;;
        *) echo "unexpected exit $1" ;;
    esac
}

shopt -s nullglob
cells=("$gathered"/*/)
[[ ${#cells[@]} -gt 0 ]] || sg_die "$gathered: no run folders to judge (every cell failed to upload?)"

rows=()
regressions=0
broken=0
gates=0
for cell_dir in "${cells[@]}"; do
    cell_dir="${cell_dir%/}"
    cell="$(basename "$cell_dir")"
    role=gate
    if [[ "$cell" == *-experiment-* ]]; then
        role=experiment
    fi
    if [[ ! -f "$cell_dir/run.json" ]]; then
        sg_log "$cell: no run.json (the cell did not produce a run folder)"
        code=2
    else
        sg_log "judging $cell ($role)"
        # Capture the code instead of exiting: one broken cell must not hide the others' verdicts.
        code=0
        baseline=()
        if [[ -n "$store" ]] && "$python" -m servegate history baseline "$cell_dir" \
                --store "$store" --nights "$nights" >/dev/null 2>&1; then
            baseline=(--baseline "history:$nights" --history-store "$store")
            sg_log "$cell: judged against the last $nights nights in $store"
        fi
        "$python" -m servegate compare "$cell_dir" "${baseline[@]}" || code=$?
        if [[ -n "$store" ]]; then
            "$python" -m servegate history add "$cell_dir" --store "$store" \
                || sg_log "$cell: not added to the history store"
        fi
    fi
    rows+=("| $cell | $role | $code | $(describe "$code") |")
    if [[ "$role" == gate ]]; then
        gates=$((gates + 1))
        case "$code" in
            0|3) ;;
            1) regressions=$((regressions + 1)) ;;
            *) broken=$((broken + 1)) ;;
        esac
    fi
done

table="$(printf '%s\n' "### servegate nightly: cells judged" "" \
    "| cell | role | exit | meaning |" "|---|---|---|---|" "${rows[@]}")"
printf '%s\n' "$table"
if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
    printf '%s\n\n' "$table" >>"$GITHUB_STEP_SUMMARY"
fi

if (( regressions > 0 )); then
    sg_log "$regressions gating cell(s) regressed"
    exit 1
fi
if (( gates == 0 )); then
    sg_log "no gating cell among the gathered folders (only experiments): nothing was judged"
    exit "$SG_EXIT_INFRA"
fi
if (( broken > 0 )); then
    sg_log "$broken gating cell(s) could not be judged"
    exit "$SG_EXIT_INFRA"
fi
sg_log "no regression in ${#cells[@]} cell(s) (inconclusive verdicts do not fail the night)"
exit "$SG_EXIT_OK"
