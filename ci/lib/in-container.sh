#!/usr/bin/env bash
# Entry point inside the runner container: check the image's interpreter has sglang, make nox
# available, then run one nox session (its GPU sessions use $SERVEGATE_PYTHON, the image's own).
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

# The image's own interpreter runs the GPU session (no venv on top of it: ROCm images keep their
# stack in the venv /opt/venv, upstream docker/rocm.Dockerfile `ENV VIRTUAL_ENV=/opt/venv`, and a
# venv made from a venv's python sees the base interpreter's site-packages, not /opt/venv's).
# It is resolved to an absolute path and exported for the noxfile (SERVEGATE_PYTHON).
image_python="${SERVEGATE_PYTHON:-python3}"
image_python="$(command -v "$image_python" 2>/dev/null)" \
    || sg_die "${SERVEGATE_PYTHON:-python3} not found in the image"
export SERVEGATE_PYTHON="$image_python"
if ! "$image_python" -c "import sglang" >/dev/null 2>&1; then
    sg_die "$image_python cannot import sglang; set SERVEGATE_PYTHON to the image's interpreter \
that has it (ROCm images: /opt/venv/bin/python)"
fi

# stdout is reserved for the session's own output (its last line is the run folder path).
# nox itself: the image's when it has one, else a private venv holding only nox (nox needs
# nothing from the image; the session's interpreter stays $SERVEGATE_PYTHON either way).
nox_python="$image_python"
if ! "$nox_python" -m nox --version >/dev/null 2>&1; then
    venv="${SERVEGATE_NOX_VENV:-/tmp/servegate-nox}"
    if ! "$venv/bin/python" -m nox --version >/dev/null 2>&1; then
        sg_log "installing nox into $venv (nox only; the session runs on $image_python)"
        "$image_python" -m venv "$venv" >&2 \
            || sg_die "python -m venv failed inside the container (is the venv module installed?)"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check nox >&2 \
            || sg_die "pip install nox failed inside the container"
    fi
    nox_python="$venv/bin/python"
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
"$nox_python" -m nox "$@" &
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
