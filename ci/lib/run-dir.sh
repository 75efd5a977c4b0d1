#!/usr/bin/env bash
# Print the run folder named by the last line of a saved `nox -s bench` stdout.
#
# Why: bench's contract is that its last output line is the run folder's path; workflows keep
# its stdout in a file and need that path checked (a crash prints something else last) before
# they upload or judge it.
# Usage: ci/lib/run-dir.sh BENCH_STDOUT_FILE     Exit: 0 and the absolute path; 2 otherwise.
set -euo pipefail

SG_SCRIPT_NAME="run-dir"  # read by ci/lib/common.sh
# shellcheck source=ci/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    echo "usage: ci/lib/run-dir.sh BENCH_STDOUT_FILE"
}

[[ $# -eq 1 ]] || sg_usage_error "expected exactly one argument, got $#"
out="$1"
[[ -f "$out" ]] || sg_die "$out: no such file (was bench's stdout saved?)"
last="$(tail -n 1 "$out")"
last="${last%$'\r'}"
[[ -n "$last" ]] || sg_die "$out: empty; bench printed no run folder path"
[[ -d "$last" ]] || sg_die "$out: last line is not a run folder: '${last:0:200}'"
[[ -f "$last/run.json" ]] || sg_die "$last: no run.json; not a servegate run folder"
(cd "$last" && pwd)
