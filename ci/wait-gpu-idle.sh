#!/usr/bin/env bash
# Wait until every GPU's used memory is below a threshold, or give up after a timeout.
#
# Why: a server left over from an earlier job (or another tenant) skews latency and can OOM the
# next launch; vLLM's runner waits for GPU memory to drop below 1 GB for the same reason.
# Memory is read with amd-smi, then rocm-smi, then nvidia-smi (the first one found), or the
# tool named by --tool.
set -euo pipefail

SG_SCRIPT_NAME="wait-gpu-idle"  # read by ci/lib/common.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=ci/lib/common.sh
source "$here/lib/common.sh"

usage() {
    cat <<'USAGE'
usage: ci/wait-gpu-idle.sh [--threshold-mb MB] [--timeout SECONDS] [--interval SECONDS]
                           [--tool auto|amd-smi|rocm-smi|nvidia-smi]

Waits until every GPU uses less than MB of memory (default 1024), polling every --interval
seconds (default 5), for at most --timeout seconds (default 900).
Exit codes: 0 idle; 2 timed out, no memory tool found, unreadable tool output, or bad arguments.
USAGE
}

threshold_mb=1024
timeout_s=900
interval_s=5
tool=auto
while [[ $# -gt 0 ]]; do
    case "$1" in
        --threshold-mb|--timeout|--interval|--tool)
            [[ $# -ge 2 ]] || sg_usage_error "$1 needs a value"
            case "$1" in
                --threshold-mb) threshold_mb="$2" ;;
                --timeout) timeout_s="$2" ;;
                --interval) interval_s="$2" ;;
                --tool) tool="$2" ;;
            esac
            shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) sg_usage_error "unknown argument $1" ;;
    esac
done
sg_is_uint "$threshold_mb" || sg_usage_error "--threshold-mb must be a whole number of MB, got '$threshold_mb'"
sg_is_uint "$timeout_s" || sg_usage_error "--timeout must be a whole number of seconds, got '$timeout_s'"
sg_is_number "$interval_s" || sg_usage_error "--interval must be a number of seconds, got '$interval_s'"

case "$tool" in
    auto)
        tool=""
        for candidate in amd-smi rocm-smi nvidia-smi; do
            if command -v "$candidate" >/dev/null 2>&1; then
                tool="$candidate"
                break
            fi
        done
        [[ -n "$tool" ]] || sg_die "no GPU memory tool found on PATH (amd-smi, rocm-smi or nvidia-smi)" ;;
    amd-smi|rocm-smi|nvidia-smi)
        command -v "$tool" >/dev/null 2>&1 || sg_die "--tool $tool: not found on PATH" ;;
    *) sg_usage_error "--tool must be auto, amd-smi, rocm-smi or nvidia-smi, got '$tool'" ;;
esac

# csv_column_mb HEADER_PATTERN DIVISOR: from CSV on stdin, print the column whose header matches
# HEADER_PATTERN (case-insensitive) for every data row, divided by DIVISOR, as whole MB.
csv_column_mb() {
    awk -F, -v pat="$1" -v div="$2" '
        NR == 1 {
            for (i = 1; i <= NF; i++) if (tolower($i) ~ pat) col = i
            if (!col) exit 3
            next
        }
        col && $col != "" {
            value = $col
            gsub(/[^0-9.]/, "", value)
            if (value == "") exit 4
            printf "%d\n", value / div
        }'
}

# read_used_mb: print one line per GPU with its used memory in MB.
read_used_mb() {
    case "$tool" in
        amd-smi)
            # amd-smi reports memory usage in MB; CSV header e.g. gpu,total_vram,used_vram,...
            amd-smi metric --mem-usage --csv | csv_column_mb '^used_vram$' 1 ;;
        rocm-smi)
            # Header: device,VRAM Total Memory (B),VRAM Total Used Memory (B)
            rocm-smi --showmeminfo vram --csv | csv_column_mb 'vram total used memory' 1048576 ;;
        nvidia-smi)
            nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits \
                | awk '{ v = $1; gsub(/[^0-9.]/, "", v); if (v == "") exit 4; printf "%d\n", v }' ;;
    esac
}

errors="$(mktemp)"
trap 'rm -f "$errors"' EXIT
start=$SECONDS
while :; do
    if ! readings="$(read_used_mb 2>"$errors")" || [[ -z "$readings" ]]; then
        sg_die "could not read GPU memory from $tool (stdout: ${readings:-<empty>}; stderr: $(head -c 300 "$errors"))"
    fi
    busy=()
    gpu=0
    while IFS= read -r used; do
        if ! sg_is_uint "$used"; then
            sg_die "could not read GPU memory from $tool: unexpected value '$used'"
        fi
        if (( used >= threshold_mb )); then
            busy+=("gpu$gpu=${used}MB")
        fi
        gpu=$((gpu + 1))
    done <<<"$readings"
    if [[ ${#busy[@]} -eq 0 ]]; then
        sg_log "all $gpu GPU(s) below ${threshold_mb} MB after $((SECONDS - start)) s ($tool)"
        exit "$SG_EXIT_OK"
    fi
    if (( SECONDS - start >= timeout_s )); then
        sg_die "timed out after ${timeout_s} s waiting for GPU memory below ${threshold_mb} MB; still busy: ${busy[*]} ($tool)"
    fi
    sg_log "waiting: ${busy[*]} at or above ${threshold_mb} MB"
    sleep "$interval_s"
done
