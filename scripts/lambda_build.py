"""What `sam build`'s makefiles ask before and after they build (functions/proxy, layers/model).

    python scripts/lambda_build.py arch ARTIFACTS_DIR LOGICAL_ID
        The architecture SAM builds LOGICAL_ID for, as pip's platform tag (aarch64 or x86_64).
    python scripts/lambda_build.py size NAME=DIR [NAME=DIR ...]
        Fails when the folders together exceed what Lambda unzips for a function and its layers.
    python scripts/lambda_build.py trim PACKAGE_DIR
        Removes from a copy of the toolsearch package what only the command line and the build use
        (BUILD_TIME_ONLY), and says how many lines it ships and leaves out.

Architecture. SAM passes a makefile build nothing but ARTIFACTS_DIR, yet it writes the build
graph (`.aws-sam/build.toml`, next to the build folder) before building, with each function's
architecture resolved from the template and --parameter-overrides. The makefile reads it there, so
`sam build --parameter-overrides Architecture=x86_64` installs x86_64 wheels. LAMBDA_ARCH (the older
way to choose) still works where no graph is found (a makefile run by hand); where both exist and
disagree, the build stops rather than produce a package that cannot import at init.

Trim. The function runs `functions/proxy/app.py` and what it imports; the command line (`toolsearch
serve`, `eval`, `catalog`, `fetch-model`, `fine-tune`) and the model's build steps are never loaded
on Lambda, so the package copied into the function leaves them out. BUILD_TIME_ONLY is the one list;
tests/test_lambda_package.py checks that nothing the handler can import (at module level or inside
a function) is on it, and runs the trimmed package on the events in events/.

Size. Lambda refuses a function whose code and layers unzip to more than 262,144,000 bytes
(250 MiB); the check counts file sizes as Lambda does (not disk blocks) and names each part.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

LAMBDA_UNZIPPED_LIMIT = 262_144_000  # bytes: 250 MiB, for the function and all its layers
PIP_ARCH = {"arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64", "amd64": "x86_64"}


# Paths inside the toolsearch package that the function leaves out: nothing functions/proxy/app.py
# imports, directly or through another module, at import or later.
BUILD_TIME_ONLY = (
    "cli",  # the `toolsearch` command: serve, catalog, explain, eval, docs, fetch-model, fine-tune
    "server/local_server.py",  # `toolsearch serve` (uvicorn); Lambda has Mangum
    "server/host_check.py",  # `toolsearch serve`'s Host header check
    "model/build",  # fetch-model (fetch, prepare, manifest, its pin) and fine-tune
    "data/model",  # the development model: the function's comes from the layer (/opt/model)
    "data/questions",  # `toolsearch eval`'s questions
)


class BuildError(Exception):
    pass


def find_build_graph(artifacts_dir: Path) -> Path | None:
    """SAM's build.toml, beside the folder that holds ARTIFACTS_DIR: `.aws-sam/build.toml` for
    `.aws-sam/build/ProxyFunction` (and for `.aws-sam/cache/<id>` in cached builds)."""
    candidate = artifacts_dir.resolve().parent.parent / "build.toml"
    return candidate if candidate.is_file() else None


def graph_architecture(graph: Path, logical_id: str) -> str | None:
    """The architecture build.toml records for the function or layer `logical_id`, if any."""
    data = tomllib.loads(graph.read_text(encoding="utf-8"))
    for definition in data.get("function_build_definitions", {}).values():
        if logical_id in definition.get("functions", []):
            return definition.get("architecture")
    for definition in data.get("layer_build_definitions", {}).values():
        if definition.get("layer") == logical_id:
            return definition.get("architecture")
    return None


def build_architecture(artifacts_dir: Path, logical_id: str, requested: str | None) -> str:
    """pip's platform tag for this build: SAM's choice, else LAMBDA_ARCH, else aarch64 (the
    template's default). Raises BuildError when the two disagree or a value is unknown."""
    if requested:
        if requested not in PIP_ARCH:
            raise BuildError(f"LAMBDA_ARCH={requested}: expected arm64 (aarch64) or x86_64")
        requested = PIP_ARCH[requested]
    graph = find_build_graph(artifacts_dir)
    from_sam = graph_architecture(graph, logical_id) if graph else None
    if from_sam is None:
        return requested or "aarch64"
    if from_sam not in PIP_ARCH:
        raise BuildError(f"{graph}: unknown architecture {from_sam!r} for {logical_id}")
    if requested and requested != PIP_ARCH[from_sam]:
        raise BuildError(
            f"sam build is building {logical_id} for {from_sam} (template parameter Architecture), "
            f"but LAMBDA_ARCH={os.environ.get('LAMBDA_ARCH')} asks for {requested}: native wheels "
            f"for the wrong architecture fail to import at init. Unset LAMBDA_ARCH, or pass "
            f"--parameter-overrides Architecture=... to sam build and sam deploy alike."
        )
    return PIP_ARCH[from_sam]


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under `folder` once unzipped (file sizes, not disk blocks)."""
    return sum(
        (Path(root) / name).lstat().st_size for root, _dirs, files in os.walk(folder) for name in files
    )


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB ({size / 2**20:,.1f} MiB)"


def check_size(parts: dict[str, Path], limit: int = LAMBDA_UNZIPPED_LIMIT) -> str:
    """A one-line summary of the sizes; raises BuildError naming each part when over `limit`."""
    sizes = {name: folder_bytes(folder) for name, folder in parts.items()}
    total = sum(sizes.values())
    listed = " + ".join(f"{name} {_mb(size)}" for name, size in sizes.items())
    summary = f"{listed} = {total:,} bytes unzipped"
    if total > limit:
        raise BuildError(
            f"too large for Lambda: {summary}, over its {limit:,}-byte limit (250 MiB) for a function "
            f"and its layers. A float32 model is 512 MB: prepare it as int8 "
            f"(`toolsearch fetch-model --int8`), or build with the development model."
        )
    return f"{summary}, {limit - total:,} bytes under Lambda's limit"


def python_lines(path: Path) -> tuple[int, int]:
    """(modules, lines) of the .py files at or under `path`."""
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    files = [f for f in files if f.suffix == ".py"]
    return len(files), sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)


def trim(package: Path) -> str:
    """Removes BUILD_TIME_ONLY from `package` (a copy of toolsearch); a summary of what is left.

    Raises BuildError when an entry is missing: a module renamed or moved must be named anew here,
    not shipped by default or forgotten."""
    missing = [entry for entry in BUILD_TIME_ONLY if not (package / entry).exists()]
    if missing:
        raise BuildError(f"{package}: BUILD_TIME_ONLY names what is not there: {', '.join(missing)}")
    out_modules = out_lines = 0
    for entry in BUILD_TIME_ONLY:
        target = package / entry
        modules, lines = python_lines(target)
        out_modules, out_lines = out_modules + modules, out_lines + lines
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    kept_modules, kept_lines = python_lines(package)
    return (
        f"toolsearch: {kept_modules} modules ({kept_lines:,} lines) shipped, "
        f"{out_modules} ({out_lines:,} lines) left out as build-time only"
    )


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["arch"] and len(argv) == 3:
            print(build_architecture(Path(argv[1]), argv[2], os.environ.get("LAMBDA_ARCH") or None))
            return 0
        if argv[:1] == ["size"] and len(argv) > 1:
            parts = dict(part.split("=", 1) for part in argv[1:])
            print(check_size({name: Path(folder) for name, folder in parts.items()}))
            return 0
        if argv[:1] == ["trim"] and len(argv) == 2:
            print(trim(Path(argv[1])))
            return 0
    except BuildError as exc:
        print(f"lambda build: {exc}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
