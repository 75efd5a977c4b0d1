#!/usr/bin/env bash
# Check out the sglang code under test and its base as two trees for `servegate ab` /
# `servegate admission ab`: DEST/head at HEAD_REF, DEST/base at BASE_REF, or (BASE_REF empty)
# at the merge base of HEAD_REF with origin/BASE_BRANCH, the commit a pull request is measured
# against. The trees are plain checkouts (servegate puts their python/ first on the import path;
# nothing is installed).
#
#   ci/lib/sglang-trees.sh REPOSITORY HEAD_REF BASE_REF BASE_BRANCH DEST
#   (REPOSITORY: owner/name on GitHub, or a local path / URL git can clone)
set -euo pipefail

SG_SCRIPT_NAME="sglang-trees"  # read by ci/lib/common.sh
# shellcheck source=ci/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    echo "usage: ci/lib/sglang-trees.sh REPOSITORY HEAD_REF BASE_REF BASE_BRANCH DEST"
}

[[ $# -eq 5 ]] || sg_usage_error "expected 5 arguments, got $#"
repository="$1"
head_ref="$2"
base_ref="$3"
base_branch="$4"
dest="$5"
[[ -n "$head_ref" ]] || sg_usage_error "HEAD_REF is empty (no pull request head to test?)"
[[ ! -e "$dest" ]] || sg_die "$dest: already exists"

url="$repository"
if [[ "$repository" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ && ! -e "$repository" ]]; then
    url="https://github.com/$repository.git"
fi

mkdir -p "$dest"
git clone --quiet "$url" "$dest/head"
# A commit already in the clone is used as is; a branch or PR ref is fetched by name.
if ! commit="$(git -C "$dest/head" rev-parse --verify --quiet "$head_ref^{commit}")"; then
    git -C "$dest/head" fetch --quiet origin "$head_ref" || sg_die "cannot fetch $head_ref from $url"
    commit="$(git -C "$dest/head" rev-parse FETCH_HEAD)"
fi
git -C "$dest/head" checkout --quiet --detach "$commit"
if [[ -z "$base_ref" ]]; then
    base_ref="$(git -C "$dest/head" merge-base HEAD "origin/$base_branch")" \
        || sg_die "no merge base of $head_ref with origin/$base_branch"
fi
git -C "$dest/head" worktree add --quiet --detach "$(cd "$dest" && pwd)/base" "$base_ref"
sg_log "head $(git -C "$dest/head" rev-parse --short HEAD), base $(git -C "$dest/base" rev-parse --short HEAD)"
