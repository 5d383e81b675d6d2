#!/usr/bin/env bash
# Run Python in the development-model build venv: venv.sh SCRIPT.py [ARGS...]
#
# Creates the pinned Python 3.11 venv in .cache/devmodel-venv (once; reinstalls only when
# requirements-build.txt changes). Offline: nothing is fetched from the Hugging Face hub, and the
# project's own modules (shared/) are importable.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="$root/.cache/devmodel-venv"
python="${DEVMODEL_PYTHON:-$(command -v python3.11 || true)}"
if [[ -z "$python" ]]; then
    echo "venv.sh: the teacher steps need Python 3.11 (set DEVMODEL_PYTHON to it)" >&2
    exit 1
fi
requirements="$here/requirements-build.txt"
stamp="$venv/.requirements.sha256"

if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]]; then
    "$venv/bin/pip" install --quiet --no-deps -r "$requirements"
    echo "$wanted" > "$stamp"
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$root/shared:$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" "$@"
