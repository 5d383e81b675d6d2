#!/usr/bin/env bash
# Install IBM's ContextForge MCP gateway into .cache/contextforge, a venv of its own (Python 3.13;
# it supports 3.12 and 3.13), for the gateway suite (tests/test_gateway_contextforge.py). The
# command is docs/gateways.md's; every dependency's version is pinned by
# scripts/contextforge-constraints.txt so that CI installs what was tested. Idempotent: the stamp
# holds what was installed, and a second run only compares it. 18 s and 175 MB with pip's cache warm
# (CI's machine keeps it between runs); longer the first time, as the wheels are downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE="mcp-contextforge-gateway==1.1.0"
CONSTRAINTS="scripts/contextforge-constraints.txt"
VENV=".cache/contextforge"

want="$PACKAGE $(sha256sum "$CONSTRAINTS" | cut -d' ' -f1)"
if [[ -f "$VENV/.installed" && "$(cat "$VENV/.installed")" == "$want" ]]; then
  exit 0
fi

python=".venv/bin/python"  # bootstrap.sh made it with Python 3.13
[[ -x "$python" ]] || python="$(command -v python3.13)"
rm -rf "$VENV"
"$python" -m venv "$VENV"
# --no-compile: byte-compiling 240 MB takes most of a minute; Python compiles what the gateway
# imports when it first starts.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -c "$CONSTRAINTS" "$PACKAGE"
echo "$want" >"$VENV/.installed"
