"""Move `shared/toolsearch/`'s modules into packages per concern, and rewrite every reference.

    python scripts/relayout.py            # move and rewrite (git mv; then ruff fixes import order)
    python scripts/relayout.py --check    # exit 1 if anything would change (a tree already moved: 0)
    python scripts/relayout.py --tree     # the packages, with modules and lines each

Re-runnable: on a tree already laid out it changes nothing; on a tree where others added code in
the old layout (old imports, old `toolsearch.x` strings, old paths in docs) it moves what is left and
rewrites what refers to it. A new top-level module it has no rule for stops it before it changes
anything, with the list: give each a line in MODULES (or KEEP) and run it again.

What it rewrites, in every text file git tracks (Python, Markdown, TOML, YAML, Makefiles, shell):
- `import` / `from` statements, parsed (ast), relative ones resolved against the file's place;
  a statement that changes is written absolute (`from toolsearch.mcp import protocol as P`);
- dotted names `toolsearch.old.X` anywhere (mock targets, logger names, entry points, `-m` commands);
- paths `old.py`, `toolsearch/old.py`, `shared/toolsearch/old.py`, `cache/dynamo.py` (docs, tests,
  BUILD_TIME_ONLY, pyproject), not when another path segment comes before them.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "shared" / "toolsearch"

# old module (dotted, under toolsearch) -> new module. A package key (`cache`) moves the folder.
MODULES: dict[str, str] = {
    # mcp/: the wire, no I/O
    "protocol": "mcp.protocol",
    "jsonrpc": "mcp.jsonrpc",
    "negotiation": "mcp.negotiation",
    "param_headers": "mcp.param_headers",
    # server/: HTTP (Starlette) and what reads a Request
    "endpoint": "server.endpoint",
    "http_edge": "server.http_edge",
    "http_refusal": "server.http_refusal",
    "streaming": "server.streaming",
    "response_size": "server.response_size",
    "catalog_routes": "server.catalog_routes",
    "host_check": "server.host_check",
    "authenticators": "server.authenticators",
    "oauth": "server.oauth",
    "serving": "server.local_server",
    "demo": "server.demo",
    # callers/: who a request comes from, without HTTP
    "callers": "callers.identity",
    "credentials": "callers.credentials",
    "aws_iam": "callers.aws_iam",
    "refusal": "callers.refusal",
    # auth/: exchange mode (today's package) and the upstream's metadata
    "metadata_relay": "auth.metadata_relay",
    # service/: the five tools
    "service": "service.tool_service",
    "tooldefs": "service.tooldefs",
    "finding": "service.finding",
    "calling": "service.upstream_calls",
    "results": "service.results",
    "fairness": "service.fairness",
    "progress": "service.progress",
    # validation/: arguments against a schema, bounded
    "validation": "validation.arguments",
    "schema_keywords": "validation.schema_keywords",
    "patterns": "validation.patterns",
    "nesting": "validation.nesting",
    # catalogs/: one caller's tools, the store, the shared tier
    "catalog": "catalogs.catalog",
    "catalog_store": "catalogs.store",
    "catalog_bounds": "catalogs.bounds",
    "catalog_lint": "catalogs.lint",
    "search_words": "catalogs.search_words",
    "printable": "catalogs.printable",
    "cache": "catalogs.cache",
    "cache.dynamo": "catalogs.cache.dynamo",
    # model/build/: what only the build runs
    "model.fetch": "model.build.fetch",
    "model.prepare": "model.build.prepare",
    "model.manifest": "model.build.manifest",
    "model.finetune": "model.build.finetune",
    # aws/: Lambda only
    "lambda_support": "aws.lambda_support",
    # ops/: logs, metrics, deadlines, bounded memory: imported by everything, importing nothing of ours
    "logs": "ops.logs",
    "telemetry": "ops.telemetry",
    "deadline": "ops.deadline",
    "bounded": "ops.bounded",
    "tasks": "ops.tasks",
    # cli/: the command line (build time only)
    "cli": "cli.main",
    "catalog_cli": "cli.catalog",
    "explain_cli": "cli.explain",
    "evaluation": "cli.evaluation",
}
# Files that are not modules, moved with the module that reads them (paths under the package).
FILES: dict[str, str] = {
    "model/potion-multilingual-128M.lock.json": "model/build/potion-multilingual-128M.lock.json",
}
# Top-level names that stay where they are. `errors.py` (the package's one error tree, if a branch
# adds it) stays at the top: every layer may import it, and it imports nothing of ours.
KEEP = {"__init__.py", "app.py", "settings.py", "errors.py", "py.typed", "data", "__pycache__"}
KEPT_PACKAGES = {"auth", "search", "upstream", "model"}

PACKAGE_DOCS = {
    "mcp": "The MCP wire, both eras: versions, JSON-RPC, negotiation, `Mcp-Param-*` headers. No I/O.",
    "server": "HTTP: the `/mcp` endpoint, its edge and refusals, streaming, answer sizes, `/catalog`, "
    "OAuth metadata, the local server. With `aws/`, the only package that imports Starlette.",
    "callers": "Who a request comes from: `Caller` and its key, the `Authorization` header read, "
    "AWS IAM principals, and the upstream's refusal as the caller's (`CallerRefused`).",
    "service": "The five tools for one caller (`ToolService`): search, describe, the calls upstream, "
    "results, fair use, progress.",
    "validation": "A call's arguments against the tool's JSON Schema, in bounded time.",
    "catalogs": "One caller's tools (`Catalog`), the per-caller store (`CatalogStore`) and its "
    "shared tier (`cache/`: DynamoDB).",
    "model.build": "The model's build steps: `fetch`, `prepare`, `manifest`, `finetune`. Never "
    "imported at run time (BUILD_TIME_ONLY of scripts/lambda_build.py).",
    "aws": "AWS Lambda only: one event loop per execution environment, EMF metrics, deadlines.",
    "ops": "Logs, metrics, the request's deadline, bounded maps and task helpers: what every layer "
    "uses; imports nothing of the package.",
    "cli": "The `toolsearch` command (`main`), `catalog`, `explain`, `eval`. Build time only.",
}

SKIP_DIRS = {".git", ".venv", ".cache", "node_modules", "__pycache__", ".aws-sam", "data"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".txt", ".cfg", ".ini"}
SELF = Path(__file__).resolve()

NEW = set(MODULES.values())
NEW_PACKAGES = {v.rsplit(".", 1)[0] for v in NEW if "." in v}
NEW_PACKAGES |= {p.rsplit(".", 1)[0] for p in list(NEW_PACKAGES) if "." in p}


def module_file(mod: str) -> Path:
    """The file of `toolsearch.<mod>`: `a/b.py`, or `a/b/__init__.py` for a package."""
    path = PKG.joinpath(*mod.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def old_present(mod: str) -> bool:
    path = PKG.joinpath(*mod.split("."))
    if path.with_suffix(".py").is_file():
        return True
    return (path / "__init__.py").is_file() and mod not in NEW_PACKAGES


def is_old(mod: str) -> bool:
    """`mod` names an old module: a key whose file still exists, or one no new package took."""
    if mod not in MODULES:
        return False
    return old_present(mod) or mod not in NEW_PACKAGES


def map_module(full: str) -> str:
    """`toolsearch.old.sub.Attr` -> `toolsearch.new.sub.Attr`; anything else as it is."""
    if full != "toolsearch" and not full.startswith("toolsearch."):
        return full
    parts = full.split(".")[1:]
    for n in range(len(parts), 0, -1):  # a new name wins over an old prefix of it
        prefix = ".".join(parts[:n])
        if prefix in NEW and (
            module_file(prefix).is_file()
            or not any(old_present(k) for k in MODULES if prefix.startswith(k + "."))
        ):
            return full
        if is_old(prefix):
            return ".".join(["toolsearch", MODULES[prefix], *parts[n:]])
    return full


# ---------------------------------------------------------------- the check before anything moves


def unknown_modules() -> list[str]:
    found = []
    for entry in sorted(PKG.iterdir()):
        name = entry.name
        if name in KEEP or name in KEPT_PACKAGES or name.endswith(".pyc"):
            continue
        stem = name[:-3] if name.endswith(".py") else name
        if entry.is_dir() and stem in {p.split(".")[0] for p in NEW_PACKAGES}:
            continue  # a package of the new layout
        if stem in MODULES:
            if entry.is_dir() and stem in MODULES:  # a dissolved package: every module needs a rule
                for sub in sorted(entry.glob("*.py")):
                    key = f"{stem}.{sub.stem}"
                    if sub.name != "__init__.py" and key not in MODULES:
                        found.append(f"{stem}/{sub.name}")
            continue
        if entry.is_file() and not name.endswith(".py"):
            continue
        found.append(name)
    return found


# ---------------------------------------------------------------------------- rewriting imports


def file_module(path: Path) -> str | None:
    """The dotted module of a file inside the package, else None."""
    try:
        rel = path.resolve().relative_to(PKG)
    except ValueError:
        return None
    parts = ["toolsearch", *rel.with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(node: ast.ImportFrom, here: str | None, is_package: bool) -> str | None:
    if not node.level:
        return node.module
    if here is None:
        return None  # a relative import outside the package (tools/, tests/): not ours
    base = here.split(".") if is_package else here.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def split_new(full: str) -> tuple[str, str]:
    parent, _, leaf = full.rpartition(".")
    return parent, leaf


def import_edit(node: ast.AST, here: str | None, is_package: bool, moving: bool) -> list[str] | None:
    """The statements that replace an import, or None to keep it as it is."""
    if isinstance(node, ast.Import):
        names, changed = [], False
        for alias in node.names:
            mapped = map_module(alias.name)
            changed |= mapped != alias.name
            names.append(mapped + (f" as {alias.asname}" if alias.asname else ""))
        return [f"import {name}" for name in names] if changed else None
    assert isinstance(node, ast.ImportFrom)
    target = resolve(node, here, is_package)
    if target is None or not (target == "toolsearch" or target.startswith("toolsearch.")):
        return None
    statements: list[str] = []
    rest: list[str] = []
    changed = bool(node.level and moving)  # a relative import in a file that moves: made absolute
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if alias.name != "*" and is_old(sub[len("toolsearch.") :]):  # `from . import protocol as P`
            parent, _, leaf = map_module(sub).rpartition(".")
            bound = alias.asname or alias.name
            statements.append(f"from {parent} import {leaf}" + ("" if leaf == bound else f" as {bound}"))
            changed = True
        else:
            rest.append(alias.name + (f" as {alias.asname}" if alias.asname else ""))
    mapped = map_module(target)
    changed |= mapped != target
    if not changed:
        return None
    if rest:
        statements.insert(0, f"from {mapped} import {', '.join(rest)}")
    return statements


def rewrite_python(text: str, path: Path, other: Callable[[str], str]) -> str:
    """Import statements regenerated where they change; `other` rewrites the text between them,
    so that each name is mapped once (mapped twice, it would go one level too deep)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return other(text)
    here = file_module(path)
    is_package = path.name == "__init__.py"
    moving = here is not None and map_module(here) != here
    lines = [line + "\n" for line in text.split("\n")]  # as ast counts lines
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode("utf-8")))
    data = text.encode("utf-8")  # ast's columns count bytes
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            begin = starts[node.lineno - 1] + node.col_offset
            finish = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
            spans.append(
                (
                    begin,
                    finish,
                    import_edit(node, here, is_package, moving),
                    lines[node.lineno - 1][: node.col_offset],
                )
            )
    out: list[str] = []
    pos = 0
    for begin, finish, statements, indent in sorted(spans, key=lambda span: span[0]):
        out.append(other(data[pos:begin].decode("utf-8")))
        original = data[begin:finish].decode("utf-8")
        if statements is None:
            out.append(original)
        else:
            # a comment inside the old statement (a noqa after its parenthesis) stays with it
            comments = re.findall(r"#[^\n]*", original)
            if comments:
                statements = [f"{statements[0]}  {comments[0]}", *statements[1:]]
            out.append(("\n" + indent).join(statements) if indent.strip() == "" else "; ".join(statements))
        pos = finish
    out.append(other(data[pos:].decode("utf-8")))
    return "".join(out)


# ------------------------------------------------------------------- dotted names and paths in text

DOTTED = re.compile(r"(?<![\w.])toolsearch(?:\.[A-Za-z_]\w*)+")


def rewrite_dotted(text: str) -> str:
    return DOTTED.sub(lambda m: map_module(m.group(0)), text)


def path_map() -> dict[str, str]:
    """`endpoint.py` -> `server/endpoint.py`, `cache/dynamo.py` -> `catalogs/cache/dynamo.py`."""
    paths = {}
    for old, new in MODULES.items():
        if not old_present(old):
            continue  # moved already: a bare `endpoint.py` in a document now means the new one
        old_p = PKG.joinpath(*old.split("."))
        if PKG.joinpath(*new.split(".")).is_dir() and not (old_p / "__init__.py").is_file():
            continue  # a package already moved: a bare `cache/` now means the new one, relative
        if (old_p / "__init__.py").is_file():  # a package that moves whole
            paths[old.replace(".", "/") + "/"] = new.replace(".", "/") + "/"
        else:
            paths[old.replace(".", "/") + ".py"] = new.replace(".", "/") + ".py"
    for old, new in FILES.items():
        if (PKG / old).exists():
            paths[old] = new
    return paths


def rewrite_paths(text: str, paths: dict[str, str]) -> str:
    if not paths:
        return text
    names = sorted(paths, key=len, reverse=True)
    alternatives = "|".join(re.escape(n) + ("" if n.endswith("/") else r"(?![\w/\-])") for n in names)
    pattern = re.compile(r"(?<![\w/.\-])((?:shared/)?toolsearch/)?(" + alternatives + ")")
    return pattern.sub(lambda m: (m.group(1) or "") + paths[m.group(2)], text)


JOINED = re.compile(r'"toolsearch"((?:\s*/\s*"[\w.\-]+")+)')


def rewrite_joined_paths(text: str, paths: dict[str, str]) -> str:
    """`ROOT / "shared" / "toolsearch" / "cache" / "dynamo.py"`: the path in pathlib segments."""

    def sub(m: re.Match[str]) -> str:
        segments = re.findall(r'"([\w.\-]+)"', m.group(1))
        for n in range(len(segments), 0, -1):
            head = "/".join(segments[:n]) + ("" if segments[n - 1].endswith(".py") else "/")
            if head in paths:
                new = paths[head].rstrip("/").split("/") + segments[n:]
                return '"toolsearch"' + "".join(f' / "{part}"' for part in new)
        return m.group(0)

    return JOINED.sub(sub, text)


def tracked_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    files = []
    for line in out.stdout.splitlines():
        path = ROOT / line
        if SKIP_DIRS & set(Path(line).parts[:-1]) or path.resolve() == SELF:
            continue
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in {"Makefile", "run"}):
            files.append(path)
    return files


# ------------------------------------------------------------------------------------ fix-ups
# What the mechanical rewrite cannot know, as idempotent text edits (each applies once: after it,
# its `old` is gone). A tree that others changed may still need a hand edit: main() lists lines
# ruff finds too long, the usual one.

ARCHITECTURE_PACKAGES = "One package per concern; `app.py` (the composition root) and `settings.py` stay at the top:\n\n- `mcp/`: the MCP wire, both eras (versions, JSON-RPC, negotiation, `Mcp-Param-*` headers); no I/O.\n- `server/`: HTTP: the endpoint, its edge and refusals, streaming, answer sizes, `/catalog`, the\n  proxy's OAuth metadata and authenticators (they read the Starlette `Request`), the local server\n  and the demo upstream.\n- `callers/`: who a request comes from, without HTTP: `Caller`, the header read, AWS IAM, refusal.\n- `auth/`: exchange mode and the upstream's metadata. `service/`: the five tools. `validation/`:\n  arguments against a schema. `catalogs/`: catalogs, their store, the DynamoDB tier (`cache/`).\n- `upstream/`, `search/`, `model/` (with `model/build/`), `toolsearch.aws` (Lambda), `ops/` (logs, metrics,\n  deadlines, bounded maps), `cli/` (the command line, build time only).\n\nImport rules, checked in `make test` (`lint-imports`, `[tool.importlinter]` in `pyproject.toml`):\n`mcp/` imports only `ops/`; `ops/` imports nothing of the package; `server/` and `upstream/` never\nimport each other; Starlette is imported only in `server/`, `toolsearch.aws` and `app.py`.\n\n"

FIXUPS: dict[str, list[tuple[str, str]]] = {
    "tests/test_lambda_package.py": [("    from .cli import main\\n", "    from ..cli.main import main\\n")],
    "shared/toolsearch/model/build/prepare.py": [
        (
            "SOURCE [OUT] [--int8] [--dims N] [--dims-method pca|truncate]",
            "SOURCE [OUT] [--int8] [--dims N]\n    [--dims-method pca|truncate]",
        )
    ],
    "tests/test_fairness.py": [
        ("(service/fairness.py), with a clock of our own.", "(service/fairness.py), with our own clock.")
    ],
    "ARCHITECTURE.md": [
        # the request diagram, realigned for the longer paths
        (
            "                    server/endpoint.py     service/tool_service.py      catalogs/store.py                          │\n                    HTTP, JSON-RPC, │  service/finding.py ─▶ SearchIndex (search/)                    ├─▶ Upstream ─▶ upstream\n                    versions        │  service/upstream_calls.py ─▶ ToolCaller.call_tool ────────────────────┘   upstream/client.py\n                    server/http_edge.py    │\n",
            "                    server/         service/        catalogs/store.py                         │\n                    endpoint.py     tool_service.py                                           │\n                    HTTP, JSON-RPC, │  finding.py ─▶ SearchIndex (search/)                    ├─▶ Upstream ─▶ upstream\n                    versions        │  upstream_calls.py ─▶ ToolCaller.call_tool ─────────────┘   upstream/client.py\n                    http_edge.py    │\n",
        ),
        (
            "| `model/` | The model2vec model: `fetch` and `prepare` at build time (`manifest`: the marker of a complete model folder, atomic writes), `load` (memory-mapped) and `unigram` at run time, `finetune` (`toolsearch fine-tune --base DIR`) |",
            "| `model/` | The model2vec model at run time: `load` (memory-mapped) and `unigram` (its tokenizer) |\n| `model/build/` | Build time only: `fetch` and `prepare` (`toolsearch fetch-model`; `manifest`: the marker of a complete model folder, atomic writes), `finetune` (`toolsearch fine-tune --base DIR`) |",
        ),
    ],
}


def fix_build_time_only(text: str) -> str:
    """The `cli` and `model/build` packages are left out whole: one entry each, not one per module."""
    lines = [line for line in text.split("\n") if not re.match(r'\s*"(cli|model/build)/[^"]*",', line)]
    if not any(line.startswith('    "cli",') for line in lines):
        at = lines.index("BUILD_TIME_ONLY = (") + 1
        lines.insert(
            at,
            '    "cli",  # the `toolsearch` command: serve, catalog, explain, eval, docs, fetch-model, fine-tune',
        )
    if not any(line.startswith('    "model/build",') for line in lines):
        at = next(n for n, line in enumerate(lines) if line.startswith('    "data/'))
        lines.insert(
            at, '    "model/build",  # fetch-model (fetch, prepare, manifest, its pin) and fine-tune'
        )
    return "\n".join(lines)


def fix_architecture(text: str) -> str:
    """The module section opens with the packages and their import rules."""
    if "One package per concern;" in text:
        return text
    head = "## Modules (`shared/toolsearch/`)\n\n"
    return text.replace(head, head + ARCHITECTURE_PACKAGES, 1)


def future_path(path: Path) -> Path:
    """Where a file will be once moved (itself when it does not move)."""
    module = file_module(path)
    if module is None or path.name == "__init__.py" or map_module(module) == module:
        return path
    return PKG.joinpath(*map_module(module).split(".")[1:]).with_suffix(".py")


def apply_fixups(path: Path, text: str) -> str:
    rel = str(future_path(path).relative_to(ROOT))
    for old, new in FIXUPS.get(rel, []):
        if old in text and new not in text:
            text = text.replace(old, new)
    if rel == "scripts/lambda_build.py" and "BUILD_TIME_ONLY = (" in text:
        text = fix_build_time_only(text)
    if rel == "ARCHITECTURE.md":
        text = fix_architecture(text)
    return text


# ------------------------------------------------------------------------------------------ moving


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def moves() -> list[tuple[Path, Path]]:
    planned = []
    for old, new in MODULES.items():
        if "." in old and old.split(".")[0] in MODULES:
            continue  # inside a package that moves whole
        old_p = PKG.joinpath(*old.split("."))
        new_p = PKG.joinpath(*new.split("."))
        if (old_p / "__init__.py").is_file() and old not in NEW_PACKAGES:
            planned.append((old_p, new_p))
        elif old_p.with_suffix(".py").is_file():
            planned.append((old_p.with_suffix(".py"), new_p.with_suffix(".py")))
    for old, new in FILES.items():
        if (PKG / old).exists():
            planned.append((PKG / old, PKG / new))
    return planned


def new_package_inits() -> list[Path]:
    return [PKG.joinpath(*p.split(".")) / "__init__.py" for p in sorted(NEW_PACKAGES)]


def print_tree() -> None:
    folders: dict[str, list[Path]] = {}
    for path in sorted(PKG.rglob("*.py")):
        if "data" not in path.relative_to(PKG).parts:
            folders.setdefault(str(path.parent.relative_to(PKG)), []).append(path)
    for folder, files in sorted(folders.items()):
        sizes = {f.name: len(f.read_text(encoding="utf-8").splitlines()) for f in files}
        label = "toolsearch/" if folder == "." else folder + "/"
        long = ", ".join(f"{name} {n}" for name, n in sizes.items() if n > 400)
        print(
            f"{label:18} {len(files):3} modules {sum(sizes.values()):6} lines"
            + (f"   over 400: {long}" if long else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if anything would change")
    parser.add_argument("--tree", action="store_true", help="print the packages with modules and lines")
    args = parser.parse_args(argv)
    if args.tree:
        print_tree()
        return 0

    unknown = unknown_modules()
    if unknown:
        print(
            "relayout: no rule for these modules of shared/toolsearch/ (add them to MODULES or KEEP):",
            file=sys.stderr,
        )
        for name in unknown:
            print(f"  {name}", file=sys.stderr)
        return 2
    for old, new in MODULES.items():
        if old_present(old) and module_file(new).is_file() and old not in NEW_PACKAGES:
            print(f"relayout: both {old} and {new} exist; merge them by hand first", file=sys.stderr)
            return 2

    paths = path_map()
    changes: dict[Path, str] = {}
    for path in tracked_files():
        text = path.read_text(encoding="utf-8")

        def other(chunk: str, paths: dict[str, str] = paths) -> str:
            return rewrite_joined_paths(rewrite_paths(rewrite_dotted(chunk), paths), paths)

        new = rewrite_python(text, path, other) if path.suffix == ".py" else other(text)
        new = apply_fixups(path, new)
        if new != text:
            changes[path] = new
    planned = moves()
    if args.check:
        for path in changes:
            print(f"would rewrite {path.relative_to(ROOT)}")
        for src, dst in planned:
            print(f"would move {src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
        missing = [p for p in new_package_inits() if not p.is_file()]
        return 1 if changes or planned or missing else 0

    for path, text in changes.items():
        path.write_text(text, encoding="utf-8")
    for src, dst in planned:
        dst.parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(src), str(dst))
    inits = [p for p in new_package_inits() if not p.is_file()]
    for init in inits:
        init.parent.mkdir(parents=True, exist_ok=True)
        package = ".".join(init.parent.relative_to(PKG).parts)
        doc = textwrap.fill(PACKAGE_DOCS.get(package, package), width=100)
        init.write_text(f'"""{doc}\n"""\n' if "\n" in doc else f'"""{doc}"""\n', encoding="utf-8")
        git("add", str(init))
    if changes or planned:  # imports written absolute sort differently: ruff puts them in order
        ruff = str(ROOT / ".venv" / "bin" / "ruff")
        subprocess.run([ruff, "check", "-q", "--fix", "--select", "I", "."], cwd=ROOT, check=False)
        subprocess.run([ruff, "format", "-q", "."], cwd=ROOT, check=False)
    long_lines = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "ruff"),
            "check",
            "-q",
            "--select",
            "E501",
            "--output-format",
            "concise",
            ".",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if long_lines:
        print(
            "relayout: lines the longer names made too long (shorten by hand):\n" + long_lines,
            file=sys.stderr,
        )
    print(f"relayout: {len(planned)} moved, {len(changes)} files rewritten, {len(inits)} packages created")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
