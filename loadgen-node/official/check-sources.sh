#!/usr/bin/env bash
# Checks that the official LoadGen sources netdiv compiles (the pinned PyPI
# sdist that fetch-source.sh verifies by sha256) are byte for byte the
# sources of a mlcommons/inference commit: every hand-written file of the
# sdist (*.cc, *.h, bindings/, mlperf.conf) against the repository's
# loadgen/ folder at that commit. The files the sdist's build generates
# (mlperf_conf.h from mlperf.conf, generated/version_generated.cc) are not
# in the repository and are left out.
#
# Usage: check-sources.sh [REPO [ROUND|VERSION [COMMIT]]]
#   REPO    a git checkout of mlcommons/inference [default: $NETDIV_INFERENCE_REPO]
#   ROUND   the round whose pinned release to check (v5.0 ... v6.1, or its
#           LoadGen version) [default: the current round]
#   COMMIT  the commit to compare with [default: the one ./releases names
#           for that release, "Increment version to X"]
# Prints one line per file that differs and a count; exits 1 on a difference.
set -euo pipefail

die() { echo "check-sources: error: $*" >&2; exit 2; }

releases="$(dirname "${BASH_SOURCE[0]}")/releases"
repo=${1:-${NETDIV_INFERENCE_REPO:-}}
wanted=${2:-}
row=$(grep -v '^#' "$releases" | awk -v w="$wanted" 'NF >= 4 && (w == "" || $1 == w || $2 == w) { r = $0 } END { print r }')
[[ -n $row ]] || die "no release for '$wanted' in $releases"
read -r round version _ pinned_commit <<<"$row"
commit=${3:-$pinned_commit}
[[ -n $repo ]] || die "name a mlcommons/inference checkout (argument or NETDIV_INFERENCE_REPO)"
git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null \
  || die "$repo has no commit $commit (fetch its history, or name another commit)"
echo "check-sources: round $round, LoadGen $version, against $commit" >&2

src=$(bash "$(dirname "$0")/fetch-source.sh" "$round" | tail -n 1)
cd "$src"
same=0
differ=0
shopt -s nullglob
for file in *.cc *.h bindings/*.cc bindings/*.h mlperf.conf; do
  [[ $file == mlperf_conf.h ]] && continue
  if git -C "$repo" show "$commit:loadgen/$file" 2>/dev/null | cmp -s - "$file"; then
    same=$((same + 1))
  else
    echo "differs or missing in $commit: loadgen/$file"
    differ=$((differ + 1))
  fi
done
echo "check-sources: $same files identical to mlcommons/inference $commit, $differ differ"
[[ $differ -eq 0 ]]
