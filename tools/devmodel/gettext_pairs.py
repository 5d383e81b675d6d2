"""English-Lithuanian sentence pairs from the gettext catalogs of pinned Debian packages.

`gettext-packages.lock` beside this file names each package (`name=version`) with its .deb's SHA-256;
`apt-get download` fetches them, `dpkg-deb` opens them, Python's `gettext` reads every
`lt/LC_MESSAGES/*.mo`. Generic software messages: nothing of the proxy's evaluation set. Used by
this pipeline (the alignment term of the fine-tuning) and by tools/devmodel/base's steps 5 and 7.
"""

from __future__ import annotations

import functools
import gettext
import hashlib
import io
import logging
import re
import subprocess
import tarfile
from pathlib import Path

LOG = logging.getLogger("devmodel.gettext")
LOCK = Path(__file__).resolve().parent / "gettext-packages.lock"

# Format directives, markup and accelerators carry no meaning to align.
_FORMAT = re.compile(
    r"%(\d+\$)?[-+ #0']*\d*(\.\d+)?(hh|h|ll|l|L|q|j|z|t|I)?[a-zA-Z%]|\{[^}]*\}|<[^>]+>|\$\{?\w+\}?"
)
_ACCEL = re.compile(r"(?<=\w)[_&](?=\w)|(?<![\w])[_&](?=\w)")
_SPACE = re.compile(r"\s+")
_LETTERS = re.compile(r"[^\W\d_]{2,}")


def read_lock(path: Path = LOCK) -> list[tuple[str, str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            spec, sha = line.split()
            name, version = spec.split("=", 1)
            rows.append((name, version, sha))
    return rows


@functools.cache
def _refresh_package_index() -> None:
    """apt-get update, at most once a run."""
    LOG.info("apt-get does not know a pinned version: refreshing the package index (apt-get update)")
    subprocess.run(["apt-get", "update", "-qq"], check=True)


def _apt_download(spec: str, deb_dir: Path) -> None:
    """apt-get download, refreshing the package index first when it does not know the version.

    A fresh machine's index can predate the pinned versions (and a Debian point release can retire
    them): a failure refreshes the index and tries again; a second one says which pin to renew.
    """
    for attempt in range(2):
        if subprocess.run(["apt-get", "download", spec], cwd=deb_dir).returncode == 0:
            return
        if attempt == 0:
            _refresh_package_index()
    raise SystemExit(
        f"apt-get download {spec} failed: the archive no longer has that version? Renew its line in"
        f" {LOCK.name} (tools/devmodel/base/README.md says how)."
    )


def fetch_debs(lock: list[tuple[str, str, str]], deb_dir: Path) -> list[Path]:
    """apt-get download each pinned package (once) and check its SHA-256."""
    deb_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, version, sha in lock:
        found = [p for p in deb_dir.glob(f"{name}_*.deb") if _deb_version(p) == version]
        if not found:
            _apt_download(f"{name}={version}", deb_dir)
            found = [p for p in deb_dir.glob(f"{name}_*.deb") if _deb_version(p) == version]
        digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
        if digest != sha:
            raise SystemExit(f"{found[0]}: SHA-256 {digest} is not the pinned {sha}")
        paths.append(found[0])
    return paths


def _deb_version(path: Path) -> str:
    # apt-get names files name_version_arch.deb with ':' (epoch) as '%3a'.
    return path.name.split("_")[1].replace("%3a", ":")


def lithuanian_catalogs(debs: list[Path], out: Path) -> list[Path]:
    """Extract every lt/LC_MESSAGES/*.mo from the packages (dpkg-deb's data tarball)."""
    out.mkdir(parents=True, exist_ok=True)
    found = []
    for deb in debs:
        proc = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, capture_output=True)
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            for member in tar.getmembers():
                if member.isfile() and "/lt/LC_MESSAGES/" in member.name and member.name.endswith(".mo"):
                    target = out / f"{deb.name.split('_')[0]}__{Path(member.name).name}"
                    target.write_bytes(tar.extractfile(member).read())
                    found.append(target)
    return sorted(found)


def clean(text: str) -> str:
    text = text.split("\x04", 1)[-1]  # msgctxt
    text = _FORMAT.sub(" ", text)
    text = _ACCEL.sub("", text)
    return _SPACE.sub(" ", text).strip(" .:;,…-")


def pairs_from(catalogs: list[Path]) -> list[tuple[str, str]]:
    """(english, lithuanian) pairs: singular messages only, cleaned, deduplicated by English;
    identical, format-only, too short (< 2 words of letters) or long (> 200 chars) ones skipped."""
    seen: dict[str, str] = {}
    for path in catalogs:
        with path.open("rb") as fh:
            catalog = gettext.GNUTranslations(fh)._catalog
        for key, value in catalog.items():
            if not isinstance(key, str) or not key or not value:
                continue
            en, lt = clean(key), clean(value)
            if en.lower() == lt.lower() or not (3 <= len(en) <= 200 and 3 <= len(lt) <= 200):
                continue
            if len(_LETTERS.findall(en)) < 2 or len(_LETTERS.findall(lt)) < 1:
                continue
            seen.setdefault(en, lt)
    return sorted(seen.items())


def load_pairs(cache: Path, lock: Path = LOCK, downloads: Path | None = None) -> list[tuple[str, str]]:
    """The English-Lithuanian pairs of the pinned packages (downloads cached in `cache`)."""
    debs = fetch_debs(read_lock(lock), downloads or cache / "align-debs")
    catalogs = lithuanian_catalogs(debs, cache / "align-mo")
    pairs = pairs_from(catalogs)
    LOG.info("%d packages, %d catalogs, %d pairs", len(debs), len(catalogs), len(pairs))
    return pairs
