#!/usr/bin/env bash
# The nightly history store lives on a dedicated git branch (default: servegate-history) of this
# repository: one JSON-lines file per run (src/servegate/history/store.py), never rewritten.
# Why a branch and not an artifact chain: it survives any number of failed nights and artifact
# retention, every night's addition is a reviewable commit, and because no two runs write the
# same file, two concurrent nights never conflict: a rejected push is rebased and retried.
#
#   ci/lib/history-store.sh restore DIR   check the branch out into DIR (empty store if the
#                                         branch does not exist yet)
#   ci/lib/history-store.sh save DIR      commit new run files in DIR and push them (rebase and
#                                         retry when another night pushed first)
# Env: SERVEGATE_HISTORY_BRANCH (default servegate-history), SERVEGATE_HISTORY_REMOTE (origin).
set -euo pipefail

SG_SCRIPT_NAME="history-store"  # read by ci/lib/common.sh
# shellcheck source=ci/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    echo "usage: ci/lib/history-store.sh {restore|save} DIR"
}

[[ $# -eq 2 ]] || sg_usage_error "expected a command and a folder, got $# arguments"
command="$1"
store="$2"
branch="${SERVEGATE_HISTORY_BRANCH:-servegate-history}"
remote="${SERVEGATE_HISTORY_REMOTE:-origin}"
attempts=5

restore() {
    [[ ! -e "$store" ]] || sg_die "$store: already exists (restore makes it)"
    if git fetch --quiet "$remote" "refs/heads/$branch:refs/remotes/$remote/$branch" 2>/dev/null; then
        git worktree add --quiet --detach "$store" "$remote/$branch"
        sg_log "restored $(find "$store" -maxdepth 1 -name '*.jsonl' | wc -l) run files from $branch"
    else
        git worktree add --quiet --detach "$store" HEAD
        git -C "$store" checkout --quiet --orphan "$branch"
        git -C "$store" rm -rf --quiet --ignore-unmatch .
        sg_log "no $branch branch on $remote yet: starting an empty store"
    fi
}

save() {
    [[ -d "$store" ]] || sg_die "$store: no such folder (restore first)"
    git -C "$store" add -- '*.jsonl'
    if git -C "$store" diff --cached --quiet; then
        sg_log "nothing new to save"
        return 0
    fi
    git -C "$store" -c user.name="servegate nightly" -c user.email="servegate@localhost" \
        commit --quiet -m "servegate history: $(git -C "$store" diff --cached --name-only | wc -l) run(s)"
    for ((attempt = 1; attempt <= attempts; attempt++)); do
        if git -C "$store" push --quiet "$remote" "HEAD:refs/heads/$branch"; then
            sg_log "saved to $branch (attempt $attempt)"
            return 0
        fi
        sg_log "push rejected (another night saved first?): rebasing, attempt $attempt"
        git -C "$store" fetch --quiet "$remote" "refs/heads/$branch:refs/remotes/$remote/$branch"
        git -C "$store" rebase --quiet "$remote/$branch"
    done
    sg_die "could not push to $branch after $attempts attempts"
}

case "$command" in
    restore) restore ;;
    save) save ;;
    *) sg_usage_error "unknown command '$command'" ;;
esac
