#!/usr/bin/env bash
# `buf breaking` for the purgatory.v1 contract: fail if the proto in this working tree
# breaks what the main branch already published (a breaking change needs a new package,
# purgatory.v2, beside v1).
#
# Which "main": the local branch `main` if there is one (the repository itself, or a clone
# of main), else `origin/main` (a fresh `git clone` checked out on another branch has only
# the remote-tracking ref). Which commit of it: the merge-base of HEAD and main, i.e. the
# contract this branch started from, so a branch that is merely behind main is not blamed
# for main's newer additions. On main itself the merge-base is HEAD, so compare against
# HEAD^ (the first parent: for a merge commit, main before the merge).
#
# The baseline is taken with `git archive` into a temporary directory, which works the
# same in a clone, a worktree (where .git is a file) and a CI checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
BUF=${BUF:-client/node/node_modules/.bin/buf}

main=""
for ref in refs/heads/main refs/remotes/origin/main; do
  if git rev-parse --verify --quiet "${ref}^{commit}" >/dev/null; then main=$ref; break; fi
done
if [ -z "$main" ]; then
  echo "buf-breaking: no main branch here (neither main nor origin/main); run: git fetch origin main" >&2
  exit 1
fi
head=$(git rev-parse HEAD)
if ! base=$(git merge-base HEAD "$main"); then
  echo "buf-breaking: HEAD shares no history with $main (shallow clone? run: git fetch --unshallow)" >&2
  exit 1
fi
if [ "$base" = "$head" ]; then
  if ! base=$(git rev-parse --verify --quiet "HEAD^"); then
    echo "buf-breaking: HEAD is the first commit; nothing to compare against"
    exit 0
  fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$base" proto/purgatory | tar -x -C "$tmp"

# The file options (go_package, java_package, ...) were adopted once, by issue 13; before
# that no other toolchain had a layout to break. A baseline without them is therefore
# compared with the option rules left out; every other FILE rule still applies, and once
# main carries the options any change to them is a break like any other.
config=()
if ! grep -q '^option go_package' "$tmp/proto/purgatory/v1/purgatory.proto"; then
  echo "buf-breaking: the baseline predates the file options; their adoption is not a break"
  except='"FILE_SAME_CSHARP_NAMESPACE","FILE_SAME_GO_PACKAGE","FILE_SAME_JAVA_MULTIPLE_FILES",'
  except+='"FILE_SAME_JAVA_OUTER_CLASSNAME","FILE_SAME_JAVA_PACKAGE","FILE_SAME_OBJC_CLASS_PREFIX",'
  except+='"FILE_SAME_PHP_NAMESPACE","FILE_SAME_RUBY_PACKAGE"'
  config=(--config "{\"version\":\"v2\",\"modules\":[{\"path\":\"proto\"}],\"breaking\":{\"use\":[\"FILE\"],\"except\":[$except]}}")
fi
"$BUF" breaking proto --against "$tmp/proto" "${config[@]}"
echo "buf breaking: proto/ is compatible with ${main#refs/*/} at $(git rev-parse --short "$base")"
