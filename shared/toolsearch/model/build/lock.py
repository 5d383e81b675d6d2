"""The model's lock file (`potion-multilingual-128M.lock.json`, beside this file) and what a
downloaded file must be: its size and digests, checked before it is kept (`verify_file`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from toolsearch.errors import ToolsearchError
from toolsearch.model.build.manifest import write_atomic

LOCK_PATH = Path(__file__).with_name("potion-multilingual-128M.lock.json")
CHUNK = 1 << 20


class ModelFetchError(ToolsearchError):
    """The model could not be downloaded or verified; the message says which file and why."""


class DigestMismatchError(ModelFetchError):
    def __init__(self, file: str, what: str, expected: str | int, actual: str | int, source: str):
        self.file, self.what, self.expected, self.actual, self.source = file, what, expected, actual, source
        super().__init__(f"{file}: {what} mismatch: expected {expected} ({source}), got {actual}")


# -- the lock file


@dataclass(frozen=True)
class LockedFile:
    name: str
    required: bool
    sha256: str | None
    size: int | None


@dataclass(frozen=True)
class Lock:
    repo: str
    revision: str
    license: str
    files: tuple[LockedFile, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "repo": self.repo,
            "revision": self.revision,
            "license": self.license,
            "files": {
                f.name: {"required": f.required, "sha256": f.sha256, "size": f.size} for f in self.files
            },
        }


def _safe_name(name: str) -> str:
    # Names come from a file in the repository, but they still become paths: refuse escapes.
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or any(p in ("..", ".", "") for p in parts) or "\\" in name:
        raise ModelFetchError(f"lock file: unsafe file name {name!r}")
    return name


def load_lock(path: Path = LOCK_PATH) -> Lock:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        files = tuple(
            LockedFile(
                name=_safe_name(name),
                required=bool(entry.get("required", True)),
                sha256=(entry.get("sha256") or None),
                size=entry.get("size"),
            )
            for name, entry in raw["files"].items()
        )
        extra = {k: v for k, v in raw.items() if k not in ("repo", "revision", "license", "files")}
        return Lock(raw["repo"], raw["revision"], raw.get("license", ""), files, extra)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelFetchError(f"cannot read lock file {path}: {exc}") from exc


def save_lock(lock: Lock, path: Path = LOCK_PATH) -> None:
    write_atomic(Path(path), (json.dumps(lock.to_json(), indent=2) + "\n").encode())


# -- what a file must be


@dataclass(frozen=True)
class Expected:
    source: str  # "lock", "hub api" or "hub headers": named in errors
    size: int | None = None
    sha256: str | None = None
    git_sha1: str | None = None  # the git blob id, for files not in LFS

    @property
    def verifiable(self) -> bool:
        return bool(self.sha256 or self.git_sha1)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, name: str, expected: Expected) -> str:
    """Check size and digests; return the file's SHA-256. Raises DigestMismatchError."""
    size = path.stat().st_size
    if expected.size is not None and size != expected.size:
        raise DigestMismatchError(name, "size", expected.size, size, expected.source)
    sha256 = file_sha256(path)
    if expected.sha256 and sha256 != expected.sha256.lower():
        raise DigestMismatchError(name, "sha256", expected.sha256, sha256, expected.source)
    if expected.git_sha1:
        blob = git_blob_sha1(path)
        if blob != expected.git_sha1.lower():
            raise DigestMismatchError(name, "git blob sha1", expected.git_sha1, blob, expected.source)
    return sha256
