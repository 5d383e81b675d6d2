"""A file read with a bound: never more than its limit in memory, whatever the file holds."""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_at_most"]


def read_at_most(path: str | Path, max_bytes: int) -> bytes | None:
    """The file's bytes, or None when it holds more than `max_bytes` (OSError as open raises it).

    One byte past the bound is read to tell "exactly full" from "too large"."""
    with Path(path).open("rb") as file:
        data = file.read(max_bytes + 1)
    return None if len(data) > max_bytes else data
