"""The hub's side of a model download: its public URL layout, its API, retries with backoff on
transient failures (connection dropped, timeout, 429, 5xx), resumable downloads."""

from __future__ import annotations

import logging
import os
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from toolsearch.errors import ToolsearchError
from toolsearch.model.build.lock import (
    DigestMismatchError,
    Expected,
    ModelFetchError,
    verify_file,
)
from toolsearch.model.build.manifest import (
    fsync_dir,
)

log = logging.getLogger("toolsearch.model.build.fetch")

TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Transient(ToolsearchError):
    """A failure worth retrying (connection dropped, timeout, 429, 5xx)."""


class NotFound(ToolsearchError):
    pass


def resolve_url(endpoint: str, repo: str, revision: str, filename: str) -> str:
    return f"{endpoint.rstrip('/')}/{repo}/resolve/{quote(revision, safe='')}/{quote(filename)}"


def api_url(endpoint: str, repo: str, revision: str) -> str:
    return f"{endpoint.rstrip('/')}/api/models/{repo}/revision/{quote(revision, safe='')}"


def _etag(value: str | None) -> str:
    return (value or "").removeprefix("W/").strip('"').lower()


def _check_commit(revision: str, commit: str | None) -> None:
    if commit and _HEX40.match(revision) and commit.lower() != revision.lower():
        raise ModelFetchError(f"the hub resolved revision {revision} to commit {commit}")


# -- HTTP


class Hub:
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
            except (Transient, httpx.TransportError) as exc:
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
                raise Transient(f"HTTP {r.status_code}")
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
                raise Transient(f"HTTP {r.status_code}")
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
            except NotFound:
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
                raise Transient(f"HTTP {r.status_code}")
            if r.status_code == 404:
                raise NotFound(name)
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
