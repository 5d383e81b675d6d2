"""The marker that says a model folder is complete, and atomic file writes.

A model folder is complete only when `toolsearch-model.json` is present: it is
written last, after every other file has been verified and renamed into place,
and removed first whenever the folder is about to change. A download that dies
halfway therefore never looks complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MANIFEST_NAME = "toolsearch-model.json"
FORMAT = 1


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write to `name.part`, fsync, rename: readers see the old file or the new one, never half."""
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, path)
    fsync_dir(path.parent)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None when the folder is not a complete model."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    return manifest


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    body = {"format": FORMAT, **manifest}
    write_atomic(folder / MANIFEST_NAME, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())


def remove_manifest(folder: Path) -> None:
    """Mark the folder incomplete before changing anything in it."""
    (folder / MANIFEST_NAME).unlink(missing_ok=True)
    fsync_dir(folder)
