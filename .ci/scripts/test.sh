#!/usr/bin/env bash
# The test command: lint the CI workflows and shell scripts, then run the whole pytest suite.
# Expects .ci/scripts/install.sh to have run (the README's first command, or .ci/run).
set -euo pipefail
cd "$(dirname "$0")/../.."

bash .ci/scripts/lint.sh
set +e
# The extended tests (minutes each; pyproject.toml's `extended` marker says which) are left out: run them with
# -m extended (a later -m replaces this one).
python3 -m pytest tests -m "not extended" --durations=30 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$rc"
