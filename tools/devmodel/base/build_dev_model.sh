#!/usr/bin/env bash
# Build the development embedding model offline (see README.md beside this file).
#
#   tools/devmodel/base/build_dev_model.sh [build_dev_model.py options]
#
# Runs build_dev_model.py in the pinned Python 3.11 build venv (venv.sh makes it). Safe to rerun:
# finished steps are cached under .cache/devmodel.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/venv.sh" "$here/build_dev_model.py" "$@"
