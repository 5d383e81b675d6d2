#!/usr/bin/env bash
# Install the tools that check template.yaml into .cache/template-tools, a venv of their own (they
# pin their own boto3, pydantic and PyYAML): aws-sam-translator (the SAM transform itself, as
# CloudFormation applies it) and cfn-lint (what `sam validate --lint` runs). tests/test_template.py
# transforms the template and lints both forms with them. With --sam, also the SAM CLI, in
# .cache/sam-venv, for `sam build` and `sam deploy` (docs/deploy.md); CI does not need it.
# Idempotent: a second run only checks. About 25 s and 210 MB the first time (350 MB more with --sam).
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="cfn-lint==1.58.0 aws-sam-translator==1.115.0"
SAM_CLI="aws-sam-cli==1.170.0"

python=".venv/bin/python"
[[ -x "$python" ]] || python="$(command -v python3.13 || command -v python3)"

install() {  # venv, stamp text, packages...
  local venv="$1" want="$2"
  shift 2
  if [[ -f "$venv/.installed" && "$(cat "$venv/.installed")" == "$want" ]]; then
    return 0
  fi
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
  echo "$want" >"$venv/.installed"
}

install .cache/template-tools "$TOOLS" $TOOLS
if [[ "${1:-}" == "--sam" ]]; then
  install .cache/sam-venv "$SAM_CLI" $SAM_CLI
  echo "SAM CLI: $PWD/.cache/sam-venv/bin/sam (export PATH=\"$PWD/.cache/sam-venv/bin:\$PATH\")"
fi
