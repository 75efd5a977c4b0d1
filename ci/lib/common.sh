# shellcheck shell=bash
# Shared helpers for servegate's runner scripts (sourced, never executed).
# Why: every script must report problems the same way: one line on stderr naming the script,
# and the servegate exit codes (2 = infrastructure or input error).

# Exit codes shared with the servegate CLI.
# shellcheck disable=SC2034  # used by the sourcing scripts
readonly SG_EXIT_OK=0
readonly SG_EXIT_INFRA=2

sg_log() {
    printf '[%s] %s\n' "${SG_SCRIPT_NAME:-servegate}" "$*" >&2
}

# sg_die MESSAGE [CODE]: print one clear line on stderr and exit (default code 2).
sg_die() {
    printf '[%s] error: %s\n' "${SG_SCRIPT_NAME:-servegate}" "$1" >&2
    exit "${2:-$SG_EXIT_INFRA}"
}

# sg_usage_error MESSAGE: a bad argument; print the message and the script's usage, exit 2.
# Each script defines a usage() function that prints its usage text on stdout.
sg_usage_error() {
    printf '[%s] error: %s\n' "${SG_SCRIPT_NAME:-servegate}" "$1" >&2
    usage >&2
    exit "$SG_EXIT_INFRA"
}

# sg_is_uint VALUE: true when VALUE is a non-negative integer.
sg_is_uint() {
    [[ "$1" =~ ^[0-9]+$ ]]
}

# sg_is_number VALUE: true when VALUE is a non-negative decimal (sleep accepts fractions).
sg_is_number() {
    [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]]
}

# sg_repo_root: the checkout this script lives in (ci/lib/.. /..).
sg_repo_root() {
    local here
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    (cd "$here/../.." && pwd)
}
