#!/usr/bin/env bash
# Fails when a commit made after the rule took effect breaks the commit-message rule of
# CONTRIBUTING.md: a subject of at most 72 characters, and a blank line between subject and body.
# Commits up to rule_start (the last commit before the rule) are history and are not checked.
# Usage: scripts/check-commit-messages.sh [revision-range]   (default: <rule start>..HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
readonly rule_start=5e620537da7f90971f6ae056a60eabac4492a69f
readonly max_subject=72

if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "check-commit-messages: not a git checkout; nothing to check"
  exit 0
fi
range=${1:-}
if [[ -z $range ]]; then
  if git cat-file -e "${rule_start}^{commit}" 2>/dev/null; then
    range="${rule_start}..HEAD"
  else
    # A shallow clone without the rule's start: check the commits it has.
    echo "check-commit-messages: ${rule_start} not in this clone; checking the commits present"
    range=HEAD
  fi
fi

failures=0
checked=0
while IFS= read -r commit; do
  checked=$((checked + 1))
  subject=$(git log -1 --format=%s "$commit")
  second_line=$(git log -1 --format=%B "$commit" | sed -n 2p)
  if ((${#subject} > max_subject)); then
    echo "commit ${commit:0:10}: subject is ${#subject} characters (at most ${max_subject}): ${subject}"
    failures=$((failures + 1))
  fi
  if [[ -n $second_line ]]; then
    echo "commit ${commit:0:10}: the line after the subject must be blank: ${second_line}"
    failures=$((failures + 1))
  fi
done < <(git rev-list "$range")

if ((failures > 0)); then
  echo "check-commit-messages: ${failures} problem(s) in ${checked} commit(s); see CONTRIBUTING.md"
  exit 1
fi
echo "check-commit-messages: ${checked} commit(s) follow the rule"
