"""The one cached-step helper: build into a temporary folder, make it readable, rename it into place.

A step's folder is named by a digest of its key (its inputs' digests and settings), so changing an
input or a setting builds a new folder instead of reusing a stale one; a folder is only ever seen
complete (the rename is the last thing done), and `force` builds it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG = logging.getLogger("devmodel")
DONE = ".step.json"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_digest(path: Path, expected: str) -> None:
    found = sha256_file(path)
    if found != expected:
        raise SystemExit(f"{path}: SHA-256 {found} is not the pinned {expected}")


def cached_step(
    cache: Path, name: str, key: dict[str, Any], build: Callable[[Path], None], *, force: bool = False
) -> Path:
    """`catalogs/cache/name-<digest of key>`, built by `build(folder)` unless a finished one is there."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
    out = cache / f"{name}-{digest}"
    if (out / DONE).is_file() and not force:
        LOG.info("%s: cached in %s", name, out)
        return out
    started = time.monotonic()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    build(tmp)
    for path in tmp.rglob("*"):  # some writers (safetensors) make 0600 files; CI and Lambda read as others
        path.chmod(0o755 if path.is_dir() else 0o644)
    (tmp / DONE).write_text(json.dumps(key, sort_keys=True, indent=1, default=str) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    LOG.info("%s: built in %.0f s (%s)", name, time.monotonic() - started, out)
    return out
