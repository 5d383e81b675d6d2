"""Real MCP servers' tool definitions, read from the pinned packages of `sources.lock`.

Each line of the lock is `kind name@version sha256 licence`. Kinds:

- `npm`: `npm pack name@version` fetches the package as the registry serves it;
- `file`: a package file at a path relative to the lock (the pipeline's test uses one).

The digest is checked before anything is read. A server's tools are read from its JavaScript
without running it: every `name: "...", [title: "...",] description: "..."` object and every
`.tool("name", "description"` / `.registerTool("name", {title, description` call. The lock pins the
versions this was checked on; a tool a pattern misses is simply not in the training set.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .steps import LOG, check_digest

_STRING = r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`(?:[^`\\$]|\\.)*`)"""
_NAME = r"""["'`]([A-Za-z][A-Za-z0-9_\-.]{2,63})["'`]"""
_PATTERNS = (
    re.compile(
        r"\bname\s*:\s*"
        + _NAME
        + r"\s*,\s*(?:title\s*:\s*"
        + _STRING
        + r"\s*,\s*)?description\s*:\s*"
        + _STRING
    ),
    re.compile(
        r"\.(?:tool|registerTool)\(\s*"
        + _NAME
        + r"\s*,\s*(?:\{\s*(?:title\s*:\s*"
        + _STRING
        + r"\s*,\s*)?description\s*:\s*)?"
        + _STRING
    ),
)
_SCRIPT = re.compile(r"\.(c|m)?js$")
MAX_SCRIPT_BYTES = 3_000_000


@dataclass(frozen=True)
class Source:
    kind: str
    spec: str  # name@version, or a path for `file`
    sha256: str
    licence: str

    @property
    def name(self) -> str:
        return self.spec.rsplit("@", 1)[0] if self.kind == "npm" else Path(self.spec).stem


def read_lock(path: Path) -> list[Source]:
    sources = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            kind, spec, sha, licence = line.split()
            if kind == "file":
                spec = str((path.parent / spec).resolve())
            sources.append(Source(kind, spec, sha, licence))
    return sources


def _unquote(text: str | None) -> str:
    if not text:
        return ""
    if text[0] == '"':
        try:
            return json.loads(text)
        except ValueError:
            pass
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def tools_in_package(path: Path) -> list[dict[str, str]]:
    """The tool definitions found in a package tarball's scripts, first occurrence of each name."""
    found: dict[str, dict[str, str]] = {}
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not (member.isfile() and _SCRIPT.search(member.name)) or member.size > MAX_SCRIPT_BYTES:
                continue
            if "node_modules/" in member.name or "/test" in member.name:
                continue
            script = tar.extractfile(member).read().decode("utf-8", "replace")  # type: ignore[union-attr]
            for pattern in _PATTERNS:
                for match in pattern.finditer(script):
                    name, title, description = (
                        match.group(1),
                        _unquote(match.group(2)),
                        _unquote(match.group(3)),
                    )
                    if name not in found and len(description) > 15 and " " in description:
                        found[name] = {"name": name, "title": title, "description": description.strip()}
    return list(found.values())


def fetch(source: Source, downloads: Path) -> Path:
    """The source's package file, checked against its digest (downloaded once into `downloads`)."""
    if source.kind == "file":
        path = Path(source.spec)
    elif source.kind == "npm":
        downloads.mkdir(parents=True, exist_ok=True)
        name, version = source.spec.rsplit("@", 1)
        path = downloads / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
        if not path.is_file():
            if shutil.which("npm") is None:
                raise SystemExit(f"npm is needed to fetch {source.spec} (or put {path.name} in {downloads})")
            LOG.info("npm pack %s", source.spec)
            subprocess.run(
                ["npm", "pack", "--silent", source.spec], cwd=downloads, check=True, capture_output=True
            )
    else:
        raise SystemExit(f"unknown source kind {source.kind!r} for {source.spec}")
    check_digest(path, source.sha256)
    return path
