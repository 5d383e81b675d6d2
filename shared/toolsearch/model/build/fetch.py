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

The HTTP is `Hub`'s own (httpx, a runtime dependency already), not `huggingface_hub`'s: that
library would replace `Hub` only (it checks no pinned SHA-256, so the lock, `verify_file`, the
manifest and `prepare` stay either way), and for a repository stored on Xet it downloads through
hf-xet's client, outside the `resolve` layout that a mirror serves and that the tests drive
faults through. Revisit if the hub stops serving `resolve` URLs to plain HTTP clients; the
comparison, with sizes, is in docs/deploy.md ("1. Fetch the model").

One module on purpose, past 400 lines: download, resumption and verification are one
procedure, each step relying on the one before.

The lock file and what a file must be (sizes, digests) are `lock.py`'s.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx

from toolsearch.model.build.hub import Hub
from toolsearch.model.build.lock import (
    LOCK_PATH,
    DigestMismatchError,
    Expected,
    Lock,
    LockedFile,
    ModelFetchError,
    load_lock,
    save_lock,
    verify_file,
)
from toolsearch.model.build.manifest import (
    read_manifest,
    remove_manifest,
    write_manifest,
)

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"


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
        hub = Hub(
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


def _fetch_raw(hub: Hub, lock: Lock, revision: str, folder: Path) -> dict[str, tuple[str, int]]:
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
