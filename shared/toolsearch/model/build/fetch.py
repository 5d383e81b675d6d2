"""Download the production model from a Hugging Face hub, verified, resumable, atomic.

`fetch_model()` downloads minishlab/potion-multilingual-128M (MIT) at the
revision pinned in `potion-multilingual-128M.lock.json` (beside this file),
using only the hub's public URL layout, `{endpoint}/{repo}/resolve/{revision}/{file}`,
and httpx. Any server with that layout works (a mirror, or the loopback server
of the tests).

Verification. Every file is checked against the SHA-256 and size in the lock
file. A file the lock has no digest for (or every file, when another revision
is asked for) is checked against what the hub itself publishes:
`{endpoint}/api/models/{repo}/revision/{revision}?blobs=true` lists each file
with its size, its git blob id (`blobId`, a SHA-1 of `"blob {size}\\0" + bytes`)
and, for files stored in Git LFS, `lfs.sha256`. When that API is unavailable,
a HEAD of the resolve URL (redirects not followed) gives the same facts in
headers: `X-Linked-Etag` (the LFS SHA-256) and `X-Linked-Size` for LFS files,
otherwise `ETag` (the git blob id) and `Content-Length`; `X-Repo-Commit`
names the commit the revision resolved to.

Refreshing the lock: `toolsearch fetch-model --update-lock` (here
`update_lock=True`) writes the SHA-256 and size of every file it downloaded and
verified into the lock file; with `--revision NEW` it moves the pin to NEW.
Review the diff and commit it.

Atomicity. Each file is downloaded to `name.part`, fsynced, verified, then
renamed; a broken download is resumed with an HTTP Range request, and
transient failures (connection drops, timeouts, 429, 5xx) are retried with
exponential backoff and jitter. The folder's manifest (`toolsearch-model.json`)
is removed before anything changes and written last, so a folder without it is
never taken for a complete model.

With `quantize` or `dims`, the raw download goes to a sibling folder
`<model_dir>.source` and the prepared model (see `prepare.py`) to `model_dir`.

The HTTP is `_Hub`'s own (httpx, a runtime dependency already), not `huggingface_hub`'s: that
library would replace `_Hub` only (it checks no pinned SHA-256, so the lock, `verify_file`, the
manifest and `prepare` stay either way), and for a repository stored on Xet it downloads through
hf-xet's client, outside the `resolve` layout that a mirror serves and that the tests drive
faults through. Revisit if the hub stops serving `resolve` URLs to plain HTTP clients; the
comparison, with sizes, is in docs/deploy.md ("1. Fetch the model").

One module on purpose, past 400 lines: download, resumption and verification are one
procedure, each step relying on the one before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import httpx

from toolsearch.errors import ToolsearchError
from toolsearch.model.build.manifest import (
    fsync_dir,
    read_manifest,
    remove_manifest,
    write_atomic,
    write_manifest,
)

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
LOCK_PATH = Path(__file__).with_name("potion-multilingual-128M.lock.json")
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
CHUNK = 1 << 20
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ModelFetchError(ToolsearchError):
    """The model could not be downloaded or verified; the message says which file and why."""


class DigestMismatchError(ModelFetchError):
    def __init__(self, file: str, what: str, expected: str | int, actual: str | int, source: str):
        self.file, self.what, self.expected, self.actual, self.source = file, what, expected, actual, source
        super().__init__(f"{file}: {what} mismatch: expected {expected} ({source}), got {actual}")


class _Transient(ToolsearchError):
    """A failure worth retrying (connection dropped, timeout, 429, 5xx)."""


class _NotFound(ToolsearchError):
    pass


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


def resolve_url(endpoint: str, repo: str, revision: str, filename: str) -> str:
    return f"{endpoint.rstrip('/')}/{repo}/resolve/{quote(revision, safe='')}/{quote(filename)}"


def api_url(endpoint: str, repo: str, revision: str) -> str:
    return f"{endpoint.rstrip('/')}/api/models/{repo}/revision/{quote(revision, safe='')}"


def _etag(value: str | None) -> str:
    return (value or "").removeprefix("W/").strip('"').lower()


def _check_commit(revision: str, commit: str | None) -> None:
    if commit and _HEX40.match(revision) and commit.lower() != revision.lower():
        raise ModelFetchError(f"the hub resolved revision {revision} to commit {commit}")


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


# -- HTTP


class _Hub:
    def __init__(
        self,
        endpoint: str,
        repo: str,
        revision: str,
        *,
        client: httpx.Client,
        retries: int,
        backoff: float,
        progress: bool,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.endpoint, self.repo, self.revision = endpoint, repo, revision
        self.client, self.retries, self.backoff, self.progress = client, retries, backoff, progress
        self.sleep = sleep

    def _retrying(self, what: str, attempt_fn: Callable[[], Any]) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return attempt_fn()
            except (_Transient, httpx.TransportError) as exc:
                if attempt == self.retries:
                    raise ModelFetchError(f"{what}: gave up after {attempt + 1} attempts: {exc}") from exc
                delay = self.backoff * (2**attempt) * (0.5 + random.random())
                log.info(
                    "model fetch: retrying",
                    extra={"what": what, "error": type(exc).__name__, "delay_s": round(delay, 1)},
                )
                self.sleep(delay)
        raise AssertionError("unreachable")

    def published(self) -> dict[str, Expected] | None:
        """Sizes and digests of every file at the revision, from the hub's model API; None if unavailable."""
        url = api_url(self.endpoint, self.repo, self.revision)

        def attempt() -> dict[str, Expected] | None:
            r = self.client.get(url, params={"blobs": "true"}, follow_redirects=True)
            if r.status_code in TRANSIENT_STATUS:
                raise _Transient(f"HTTP {r.status_code}")
            if r.status_code != 200:
                return None
            try:
                info = r.json()
                siblings = info["siblings"]
            except (ValueError, KeyError, TypeError):
                return None
            _check_commit(self.revision, info.get("sha"))
            out: dict[str, Expected] = {}
            for s in siblings:
                lfs = s.get("lfs") or {}
                if lfs.get("sha256"):
                    out[s["rfilename"]] = Expected("hub api", lfs.get("size", s.get("size")), lfs["sha256"])
                else:
                    out[s["rfilename"]] = Expected("hub api", s.get("size"), None, s.get("blobId"))
            return out

        try:
            return self._retrying("model API", attempt)
        except ModelFetchError:
            return None

    def published_by_headers(self, name: str) -> Expected | None:
        """The same facts from a HEAD of the resolve URL; None if the file is not there."""
        url = resolve_url(self.endpoint, self.repo, self.revision, name)

        def attempt() -> Expected | None:
            r = self.client.head(url, follow_redirects=False)
            if r.status_code in TRANSIENT_STATUS:
                raise _Transient(f"HTTP {r.status_code}")
            if r.status_code == 404:
                return None
            if r.status_code >= 400:
                raise ModelFetchError(f"{name}: HEAD {url}: HTTP {r.status_code}")
            _check_commit(self.revision, r.headers.get("X-Repo-Commit"))
            linked = _etag(r.headers.get("X-Linked-Etag"))
            if _HEX64.match(linked):
                size = r.headers.get("X-Linked-Size")
                return Expected("hub headers", int(size) if size else None, linked)
            etag = _etag(r.headers.get("ETag"))
            size = r.headers.get("Content-Length") if r.status_code == 200 else None
            size_int = int(size) if size else None
            if _HEX64.match(etag):
                return Expected("hub headers", size_int, etag)
            if _HEX40.match(etag):
                return Expected("hub headers", size_int, None, etag)
            return Expected("hub headers", size_int)

        return self._retrying(f"HEAD {name}", attempt)

    def download(self, name: str, dest: Path, expected: Expected) -> str | None:
        """Download, verify and rename into place; the SHA-256, or None if the hub has no such file."""
        url = resolve_url(self.endpoint, self.repo, self.revision, name)
        part = dest.with_name(dest.name + ".part")
        from tqdm import tqdm  # model2vec's dependency; imported here so loading a model never needs it

        with tqdm(
            total=expected.size,
            initial=part.stat().st_size if part.exists() else 0,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=name,
            file=sys.stderr,
            disable=not self.progress,
            leave=True,
        ) as bar:
            try:
                self._retrying(name, lambda: self._download_once(url, name, part, expected, bar))
            except _NotFound:
                return None
        try:
            sha256 = verify_file(part, name, expected)
        except DigestMismatchError:
            part.unlink(missing_ok=True)  # start over next time; never resume from bad bytes
            raise
        os.replace(part, dest)
        fsync_dir(dest.parent)
        return sha256

    def _download_once(self, url: str, name: str, part: Path, expected: Expected, bar: Any) -> None:
        have = part.stat().st_size if part.exists() else 0
        if expected.size is not None and have > expected.size:
            part.unlink()
            have = 0
        if expected.size is not None and have == expected.size:
            return  # whole already; verification decides
        # Identity encoding: Range offsets and the digest are about the stored bytes, not a gzip of them.
        headers = {"Accept-Encoding": "identity"} | ({"Range": f"bytes={have}-"} if have else {})
        with self.client.stream("GET", url, headers=headers, follow_redirects=True) as r:
            if r.status_code == 416 and have:
                return  # nothing past what we hold: verification decides
            if r.status_code in TRANSIENT_STATUS:
                raise _Transient(f"HTTP {r.status_code}")
            if r.status_code == 404:
                raise _NotFound(name)
            if r.status_code not in (200, 206):
                raise ModelFetchError(f"{name}: GET {url}: HTTP {r.status_code}")
            mode = "ab"
            if r.status_code == 206 and not r.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
                got = r.headers.get("Content-Range")
                raise ModelFetchError(f"{name}: server answered Range {have}- with {got}")
            if r.status_code == 200 and have:
                mode, have = "wb", 0  # the server ignored Range: start again
                bar.reset(total=expected.size)
            with open(part, mode) as out:
                try:
                    # Unchunked, so every byte received is on disk before a dropped connection raises.
                    for block in r.iter_raw():
                        out.write(block)
                        bar.update(len(block))
                finally:
                    out.flush()
                    os.fsync(out.fileno())


# -- the whole fetch


def source_dir_for(model_dir: Path) -> Path:
    return model_dir.with_name(model_dir.name + ".source")


def _prepared_spec(quantize: str | None, dims: int | None) -> dict[str, Any] | None:
    if quantize is None and dims is None:
        return None
    return {"quantize": quantize, "dims": dims}


def _complete(folder: Path, repo: str, revision: str, prepared: dict[str, Any] | None) -> bool:
    manifest = read_manifest(folder)
    if not manifest or manifest.get("repo") != repo or manifest.get("revision") != revision:
        return False
    if manifest.get("prepared") != prepared:
        return False
    return all((folder / name).is_file() for name in manifest.get("files", {}))


def fetch_model(
    model_dir: str | Path,
    endpoint: str = DEFAULT_ENDPOINT,
    revision: str | None = None,
    quantize: str | None = None,
    dims: int | None = None,
    update_lock: bool = False,
    progress: bool = True,
    *,
    lock_path: str | Path = LOCK_PATH,
    retries: int = 5,
    backoff: float = 1.0,
    timeout: float = 60.0,
) -> Path:
    """Download (and optionally prepare) the model into `model_dir`; return the folder to load.

    `revision` defaults to the lock's. `quantize` is None or "int8"; `dims`
    keeps that many dimensions (see `prepare.py`). A folder already complete
    for the same revision and options is returned without touching the network.
    Raises ModelFetchError (DigestMismatchError for a bad file).
    """
    if quantize not in (None, "int8"):
        raise ModelFetchError(f"quantize must be int8 or nothing, not {quantize!r}")
    if dims is not None and dims < 1:
        raise ModelFetchError(f"dims must be at least 1, not {dims}")
    lock_path = Path(lock_path)
    lock = load_lock(lock_path)
    revision = revision or lock.revision
    model_dir = Path(model_dir)
    prepared = _prepared_spec(quantize, dims)
    if _complete(model_dir, lock.repo, revision, prepared):
        return model_dir

    raw_dir = source_dir_for(model_dir) if prepared else model_dir
    headers = {"User-Agent": "toolsearch-fetch-model"}
    with httpx.Client(timeout=httpx.Timeout(timeout), headers=headers) as client:
        hub = _Hub(
            endpoint, lock.repo, revision, client=client, retries=retries, backoff=backoff, progress=progress
        )
        fetched = _fetch_raw(hub, lock, revision, raw_dir)

    if update_lock:
        # A file not downloaded keeps its digest only if the pin did not move.
        unchanged = revision == lock.revision
        files = tuple(
            LockedFile(
                f.name,
                f.required,
                *(fetched.get(f.name) or ((f.sha256, f.size) if unchanged else (None, None))),
            )
            for f in lock.files
        )
        save_lock(Lock(lock.repo, revision, lock.license, files, lock.extra), lock_path)
        log.info("model fetch: lock file updated", extra={"lock_path": str(lock_path), "revision": revision})

    if prepared:
        from toolsearch.model.build.prepare import prepare_model

        prepare_model(raw_dir, model_dir, quantize=quantize, dims=dims)
    else:
        from toolsearch.model.unigram import write_sidecar

        write_sidecar(model_dir)  # the vocabulary as the loader maps it (prepare does it too)
    return model_dir


def _fetch_raw(hub: _Hub, lock: Lock, revision: str, folder: Path) -> dict[str, tuple[str, int]]:
    """Download every file of the lock into `folder`; {name: (sha256, size)} of those present."""
    if _complete(folder, lock.repo, revision, None):
        manifest = read_manifest(folder) or {}
        return {n: (e["sha256"], e["size"]) for n, e in manifest["files"].items()}
    folder.mkdir(parents=True, exist_ok=True)
    remove_manifest(folder)

    use_lock = revision == lock.revision
    published: dict[str, Expected] | None = None
    if not use_lock or any(f.sha256 is None for f in lock.files):
        published = hub.published()

    fetched: dict[str, tuple[str, int]] = {}
    for f in lock.files:
        if use_lock and f.sha256:
            expected = Expected("lock", f.size, f.sha256)
        elif published is not None:
            if f.name not in published:
                if f.required:
                    raise ModelFetchError(f"{f.name}: not in {hub.repo} at {revision}")
                continue
            expected = published[f.name]
        else:
            found = hub.published_by_headers(f.name)
            if found is None:
                if f.required:
                    raise ModelFetchError(f"{f.name}: not found in {hub.repo} at {revision}")
                continue
            expected = found
        if not expected.verifiable:
            raise ModelFetchError(
                f"{f.name}: cannot verify: the lock has no digest and the hub published none"
            )
        dest = folder / f.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        sha256: str | None
        try:
            sha256 = verify_file(dest, f.name, expected) if dest.is_file() else None
        except DigestMismatchError:
            sha256 = None  # a stale or damaged copy: download again
        if sha256 is None:
            sha256 = hub.download(f.name, dest, expected)
        if sha256 is None:
            if f.required:
                raise ModelFetchError(f"{f.name}: not found in {hub.repo} at {revision}")
            continue
        fetched[f.name] = (sha256, dest.stat().st_size)

    write_manifest(
        folder,
        {
            "repo": lock.repo,
            "revision": revision,
            "license": lock.license,
            "prepared": None,
            "files": {n: {"sha256": s, "size": z} for n, (s, z) in fetched.items()},
        },
    )
    return fetched
