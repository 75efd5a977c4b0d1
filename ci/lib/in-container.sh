#!/usr/bin/env bash
# Entry point inside the runner container: make nox available, then run one nox session.
# Why a file and not `bash -c "..."`: the nox arguments stay an argument list end to end,
# never a shell string built from workflow input. Afterwards, files the session created in the
# mounted checkout are handed back to the host user (SERVEGATE_HOST_UID/GID), so the runner's
# next `actions/checkout` can clean the workspace.
# Usage (from ci/run-in-container.sh): bash ci/lib/in-container.sh NOX_ARGS...
set -euo pipefail

SG_SCRIPT_NAME="in-container"  # read by ci/lib/common.sh
# shellcheck source=ci/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    echo "usage: ci/lib/in-container.sh NOX_ARGS...   (e.g. -s bench -- --suite premerge)"
}

if [[ $# -eq 0 ]]; then
    sg_usage_error "no nox arguments given"
fi

python="${SERVEGATE_PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || sg_die "$python not found in the image"

# stdout is reserved for the session's own output (its last line is the run folder path).
# nox goes into its own venv over the image's site-packages: many images' system python is
# "externally managed" (PEP 668) and refuses a plain `pip install`.
if ! "$python" -m nox --version >/dev/null 2>&1; then
    venv="${SERVEGATE_NOX_VENV:-/tmp/servegate-nox}"
    sg_log "installing nox into $venv (over the image's site-packages)"
    "$python" -m venv --system-site-packages "$venv" >&2 \
        || sg_die "python -m venv failed inside the container (is the venv module installed?)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check nox >&2 \
        || sg_die "pip install nox failed inside the container"
    python="$venv/bin/python"
fi

give_back_files() {
    local uid="${SERVEGATE_HOST_UID:-}" gid="${SERVEGATE_HOST_GID:-}" repo
    if [[ -n "$uid" && "$uid" != 0 ]] && sg_is_uint "$uid" && sg_is_uint "${gid:-x}"; then
        repo="$(sg_repo_root)"
        find "$repo" -xdev -user 0 -exec chown "$uid:$gid" {} + 2>/dev/null || true
    fi
}

# Run nox as a child (not exec) so the files can be handed back afterwards; forward the stop
# signals docker delivers (through --init) to it.
"$python" -m nox "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
code=0
wait "$child" || code=$?
# A signal interrupts the first wait; wait again for nox to finish its own teardown.
if kill -0 "$child" 2>/dev/null; then
    wait "$child" || code=$?
fi
give_back_files
exit "$code"
