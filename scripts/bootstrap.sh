#!/usr/bin/env bash
# Install what the project needs into .venv (Python 3.13, as Lambda runs) and, with --test, the npm
# peers the tests run, the template checkers (scripts/install-template-tools.sh: the SAM
# transform and cfn-lint, in .cache/template-tools) and the ContextForge gateway the gateway suite
# runs (scripts/install-contextforge.sh, in .cache/contextforge). Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  local candidates=(python3.13)
  if command -v pyenv >/dev/null 2>&1; then
    candidates+=("$(pyenv root)"/versions/3.13*/bin/python3.13)
  fi
  candidates+=("$HOME"/.pyenv/versions/3.13*/bin/python3.13 /usr/local/bin/python3.13 /usr/bin/python3.13)
  for candidate in "${candidates[@]}"; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13)' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  echo "Python 3.13 not found: install it (e.g. pyenv install 3.13) and run again" >&2
  return 1
}

extras=""
[[ "${1:-}" == "--test" ]] && extras="[test]"

stamp=".venv/.installed${extras}"
if [[ ! -x .venv/bin/python ]]; then
  "$(find_python)" -m venv .venv
fi
if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${extras}"
  touch "$stamp"
fi

if [[ -n "$extras" ]]; then
  if [[ ! -d tests/node/node_modules || tests/node/package-lock.json -nt tests/node/node_modules ]]; then
    npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
  fi
  scripts/install-template-tools.sh
  scripts/install-contextforge.sh
fi
