#!/usr/bin/env bash
# Start the runner image for one GPU type and run a nox session inside it.
#
# Why: GPU sessions must run over the image's own ROCm/CUDA sglang; the image and the docker
# arguments per GPU type live here, once, instead of in every workflow. Arguments are arrays
# throughout (no shell strings), HF_TOKEN is passed by name only, and the repository is mounted
# at its own path so the run folder path printed by `nox -s bench` is valid on the host too.
set -euo pipefail

SG_SCRIPT_NAME="run-in-container"  # read by ci/lib/common.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=ci/lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=ci/lib/images.sh
source "$here/lib/images.sh"

usage() {
    cat <<'USAGE'
usage: ci/run-in-container.sh --gpu {gfx95|gfx942|nvidia} [--image IMAGE] [--name NAME] [--dry-run]
                              [--] NOX_ARGS...

Runs `nox NOX_ARGS...` inside the runner image for the GPU type, e.g.
  ci/run-in-container.sh --gpu gfx95 -- -s bench -- --suite premerge

Images (default, override with --image or SERVEGATE_IMAGE):
  gfx95  (MI355X)          lmsysorg/sglang:<ver>-rocm720-mi35x   (or sglang-rocm / rocm/sgl-dev mi35x)
  gfx942 (MI300X, MI325X)  lmsysorg/sglang:<ver>-rocm720-mi30x
  nvidia                   lmsysorg/sglang:<ver>
Environment:
  SERVEGATE_IMAGE      image to use instead of the default for the GPU type
  SERVEGATE_HF_CACHE   host Hugging Face cache to mount at /root/.cache/huggingface (default on
                       ROCm when /home/runner/sglang-data exists: that folder at /sgl-data, HF_HOME
                       /sgl-data/hf-cache, as upstream's AMD CI; else $HF_HOME or ~/.cache/huggingface)
  SERVEGATE_SGLANG_DATA  upstream's runner data folder (default /home/runner/sglang-data)
  SERVEGATE_PODINFO_DEVICES  render-device list (default /etc/podinfo/gha-render-devices)
  HF_TOKEN             forwarded by name (-e HF_TOKEN); its value never appears in arguments
  SERVEGATE_DOCKER     docker client to call (default: docker)
--dry-run prints the docker argument list (one per line) instead of running it.
Exit code: the nox session's; 2 on bad arguments or when docker cannot start.
USAGE
}

gpu=""
image="${SERVEGATE_IMAGE:-}"
name=""
dry_run=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --gpu)
            [[ $# -ge 2 ]] || sg_usage_error "--gpu needs a value"
            gpu="$2"; shift 2 ;;
        --gpu=*) gpu="${1#--gpu=}"; shift ;;
        --image)
            [[ $# -ge 2 && -n "$2" ]] || sg_usage_error "--image needs a value"
            image="$2"; shift 2 ;;
        --image=*) image="${1#--image=}"; shift ;;
        --name)
            [[ $# -ge 2 && -n "$2" ]] || sg_usage_error "--name needs a value"
            name="$2"; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) sg_usage_error "unknown option $1" ;;
        *) break ;;
    esac
done
nox_args=("$@")

case "$gpu" in
    gfx95)  default_image="$SG_DEFAULT_IMAGE_GFX95" ;;
    gfx942) default_image="$SG_DEFAULT_IMAGE_GFX942" ;;
    nvidia) default_image="$SG_DEFAULT_IMAGE_NVIDIA" ;;
    "") sg_usage_error "--gpu is required (gfx95, gfx942 or nvidia)" ;;
    *) sg_usage_error "--gpu must be gfx95, gfx942 or nvidia, got '$gpu'" ;;
esac
[[ ${#nox_args[@]} -gt 0 ]] || sg_usage_error "no nox arguments given (e.g. -- -s bench -- --suite premerge)"
image="${image:-$default_image}"
[[ "$image" =~ ^[A-Za-z0-9._/:@-]+$ ]] || sg_usage_error "image '$image' is not a valid image reference"
if [[ -z "$name" ]]; then
    name="servegate-${GITHUB_RUN_ID:-local}-${GITHUB_JOB:-job}-$$"
fi
[[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || sg_usage_error "container name '$name' is not valid"

repo="$(sg_repo_root)"
# Upstream references (sgl-project/sglang), read for this script:
#   U1 = scripts/ci/amd/amd_ci_start_container.sh (commit 00baeb237e77): its `docker run`
#   U2 = scripts/ci/amd/amd_ci_exec.sh (commit 1aaf22493b48): the env of every `docker exec`
# Hugging Face cache. Upstream's AMD runners keep models (pre-seeded) and kernel caches in
# /home/runner/sglang-data, mounted at /sgl-data with HF_HOME=/sgl-data/hf-cache (U1:
# CACHE_HOST=/home/runner/sglang-data, -v $CACHE_HOST:/sgl-data, -e HF_HOME=/sgl-data/hf-cache).
# An explicit SERVEGATE_HF_CACHE wins; elsewhere $HF_HOME or ~/.cache/huggingface is mounted.
sglang_data="${SERVEGATE_SGLANG_DATA:-/home/runner/sglang-data}"
hf_cache="${SERVEGATE_HF_CACHE:-}"
use_sglang_data=0
if [[ -z "$hf_cache" && "$gpu" != nvidia && -d "$sglang_data" ]]; then
    use_sglang_data=1
fi
hf_cache="${hf_cache:-${HF_HOME:-$HOME/.cache/huggingface}}"
container_hf=/root/.cache/huggingface
# Render devices: on upstream's Kubernetes runners the pod names the GPUs this job may use in
# /etc/podinfo/gha-render-devices (`--device /dev/dri/renderD128 ...`); else all of /dev/dri
# (U1: DEVICE_FLAG). Read as words and checked: only --device options with /dev paths pass.
podinfo="${SERVEGATE_PODINFO_DEVICES:-/etc/podinfo/gha-render-devices}"
render_devices=(--device=/dev/dri)
if [[ "$gpu" != nvidia && -f "$podinfo" ]]; then
    read -r -a render_devices < <(tr '\n' ' ' < "$podinfo"; echo) \
        || sg_die "cannot read $podinfo"
    [[ ${#render_devices[@]} -gt 0 ]] || sg_die "$podinfo is empty"
    for word in "${render_devices[@]}"; do
        [[ "$word" =~ ^(--device|--device=/dev/[A-Za-z0-9/_.:-]+|/dev/[A-Za-z0-9/_.:-]+)$ ]] \
            || sg_die "$podinfo: unexpected word '$word' (expected --device /dev/...)"
    done
fi

args=(run --rm --init --name "$name" --network host --shm-size 32g)  # shm 32g: U1
case "$gpu" in
    gfx95|gfx942)
        args+=(--user root                                   # U1
               --device=/dev/kfd "${render_devices[@]}"      # U1: --device=/dev/kfd ${DEVICE_FLAG}
               --ulimit nofile=65536:65536                   # U1
               --group-add video                             # U1
               --cap-add=SYS_PTRACE                          # U1
               --security-opt seccomp=unconfined             # U1
               -e HF_HUB_ETAG_TIMEOUT=300 -e HF_HUB_DOWNLOAD_TIMEOUT=300   # U1
               -e PYTHONPATH=/opt/tilelang                   # U1: tilelang (the DSA backends)
               -e SGLANG_IS_IN_CI=1 -e SGLANG_IS_IN_CI_AMD=1 # U2 ENV_MAP
               -e SGLANG_ENABLE_ASYNC_ASSERT=0               # U2: aborts MXFP4 decode on AMD
               -e SGLANG_SANITIZE_NAN_LOGITS=0               # U2: lowers decode occupancy
               -e SGLANG_USE_AITER=1)                        # U2
        if [[ "$gpu" == gfx95 ]]; then
            args+=(-e GPU_ARCHS=gfx950)                      # U2: mi35x only
        fi ;;
    nvidia)
        args+=(--gpus all) ;;
esac
args+=(-v "$repo:$repo" -w "$repo")
if [[ "$use_sglang_data" -eq 1 ]]; then
    args+=(-v "$sglang_data:/sgl-data" -e HF_HOME=/sgl-data/hf-cache                 # U1
           -e MIOPEN_USER_DB_PATH=/sgl-data/miopen-cache                             # U1
           -e MIOPEN_CUSTOM_CACHE_DIR=/sgl-data/miopen-cache)                        # U1
else
    args+=(-v "$hf_cache:$container_hf" -e "HF_HOME=$container_hf")
fi
args+=(-e HF_TOKEN
       -e "SERVEGATE_IMAGE=$image"
       -e "SERVEGATE_HOST_UID=$(id -u)" -e "SERVEGATE_HOST_GID=$(id -g)"
       -e PYTHONDONTWRITEBYTECODE=1)
# Provenance for the run folder and the job summary, forwarded by name when set.
for var in CI GITHUB_ACTIONS GITHUB_RUN_ID GITHUB_SHA GITHUB_REPOSITORY GITHUB_SERVER_URL; do
    if [[ -n "${!var:-}" ]]; then
        args+=(-e "$var")
    fi
done
if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
    args+=(-v "$GITHUB_STEP_SUMMARY:$GITHUB_STEP_SUMMARY" -e GITHUB_STEP_SUMMARY)
fi
args+=("$image" bash "$repo/ci/lib/in-container.sh" "${nox_args[@]}")

docker_bin="${SERVEGATE_DOCKER:-docker}"
if [[ "$dry_run" -eq 1 ]]; then
    printf '%s\n' "$docker_bin" "${args[@]}"
    exit "$SG_EXIT_OK"
fi
command -v "$docker_bin" >/dev/null 2>&1 || sg_die "docker client '$docker_bin' not found on PATH"
if [[ "$use_sglang_data" -eq 0 && ! -d "$hf_cache" ]]; then
    mkdir -p "$hf_cache" || sg_die "cannot create the Hugging Face cache folder $hf_cache"
fi

# A cancelled job sends SIGINT/SIGTERM: remove the container so no GPU process outlives the job.
# shellcheck disable=SC2329  # invoked by the traps below
on_signal() {
    local code="$1"
    sg_log "signal received: removing container $name"
    "$docker_bin" rm -f "$name" >/dev/null 2>&1 || true
    exit "$code"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

sg_log "gpu=$gpu image=$image container=$name: nox ${nox_args[*]}"
set +e
"$docker_bin" "${args[@]}" &
child=$!
wait "$child"
code=$?
set -e
# docker itself reports 125 (daemon/run error), 126/127 (command not runnable in the image).
case "$code" in
    125|126|127) sg_die "docker could not run the container (exit $code; image $image)" ;;
esac
exit "$code"
