"""Real MCP servers' tool definitions, read from the pinned packages of `sources.lock`.

Each line of the lock is `kind name@version sha256 licence`. Kinds:

- `npm`: `npm pack name@version` fetches the package as the registry serves it;
- `pypi`: `pip download --no-deps name==version` fetches the wheel;
- `file`: a package file at a path relative to the lock (the pipeline's test uses one).

The digest is checked before anything is read, and nothing is run. An npm server's tools are read
from its JavaScript: every `name: "...", [title: "...",] description: "..."` object and every
`.tool("name", "description"` / `.registerTool("name", {title, description` call. A Python
server's are read from its source with `ast`: functions decorated with `@tool(...)` or
`@<anything>.tool(...)` (the name and description given to the decorator, else the function's name
and the first paragraph of its docstring) and `Tool(name="...", description="...")` calls. The lock
pins the versions this was checked on; a tool no pattern finds is simply not in the training set.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
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
        if self.kind in ("npm", "pypi"):
            return self.spec.rsplit("@", 1)[0]
        return Path(self.spec).name.split(".")[0]


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
    """The tool definitions found in a package (npm tarball or wheel), first occurrence of each name."""
    if path.suffix == ".whl":
        return tools_in_wheel(path)
    return tools_in_tarball(path)


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _python_tools(tree: ast.AST) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                call = decorator if isinstance(decorator, ast.Call) else None
                target = call.func if call else decorator
                named = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if named != "tool":
                    continue
                given = {k.arg: _text(k.value) for k in (call.keywords if call else [])}
                docstring = (ast.get_docstring(node) or "").split("\n\n")[0]
                found.append((given.get("name") or node.name, given.get("description") or docstring))
        elif (
            isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Tool"
        ):
            given = {k.arg: _text(k.value) for k in node.keywords}
            if given.get("name") and given.get("description"):
                found.append((given["name"], given["description"].split("\n\n")[0]))  # type: ignore[union-attr]
    return found


def tools_in_wheel(path: Path) -> list[dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    with zipfile.ZipFile(path) as wheel:
        for name in sorted(wheel.namelist()):
            if not name.endswith(".py") or "/tests/" in name:
                continue
            try:
                tree = ast.parse(wheel.read(name))
            except SyntaxError:
                continue
            for tool, description in _python_tools(tree):
                description = " ".join(description.split())
                if tool not in found and len(description) > 15 and " " in description:
                    found[tool] = {"name": tool, "title": "", "description": description}
    return list(found.values())


def tools_in_tarball(path: Path) -> list[dict[str, str]]:
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
    elif source.kind == "pypi":
        downloads.mkdir(parents=True, exist_ok=True)
        name, version = source.spec.rsplit("@", 1)
        stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}-"
        found = [p for p in downloads.glob("*.whl") if p.name.startswith(stem)]
        if not found:
            LOG.info("pip download %s==%s", name, version)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "-d",
                    str(downloads),
                    f"{name}=={version}",
                ],
                check=True,
                capture_output=True,
            )
            found = [p for p in downloads.glob("*.whl") if p.name.startswith(stem)]
        if not found:
            raise SystemExit(f"pip download {name}=={version} gave no wheel in {downloads}")
        path = found[0]
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
