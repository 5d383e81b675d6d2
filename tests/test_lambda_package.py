"""The function package ships run-time code only: what it leaves out, nothing run time needs.

`scripts/lambda_build.py`'s BUILD_TIME_ONLY is the list of what functions/proxy/Makefile leaves out
of the copy of toolsearch (the command line, the model's build steps, the bundled model). Two
proofs that nothing run time needs is on it: the import graph from functions/proxy/app.py, read
from the sources (imports inside functions count: a lazy import is still an import on Lambda),
reaches none of it; and the package the makefile builds, run in a fresh interpreter that sees
neither shared/ nor the repository, answers every event in events/ with them absent.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from fixtures.sam_build import make, python_without_pip, sam_build_folder

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shared" / "toolsearch"
HANDLER = ROOT / "functions" / "proxy" / "app.py"
FUNCTION_MAKEFILE = ROOT / "functions" / "proxy" / "Makefile"
LAYER_MAKEFILE = ROOT / "layers" / "model" / "Makefile"
BUNDLED_MODEL = PACKAGE / "data" / "model"
EVENTS = ROOT / "events"

sys.path.insert(0, str(ROOT / "scripts"))
from lambda_build import BUILD_TIME_ONLY  # noqa: E402


def module_files(package: Path) -> dict[str, Path]:
    """Every module of the package under `package` (its folder), by dotted name."""
    found = {}
    for path in package.rglob("*.py"):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(path: Path, module: str) -> set[str]:
    """Every dotted name `path` imports anywhere in it (module level or inside a function), and
    for `from X import Y` X.Y too (Y may be a submodule); relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names)
    return names


def run_time_modules(modules: dict[str, Path], entry: Path) -> dict[str, list[str]]:
    """The modules `entry` can import, each with the chain of imports that reaches it."""

    def reached_by(path: Path, name: str) -> set[str]:
        found = set()
        for imported in imported_names(path, name):
            parts = imported.split(".")  # importing a.b.c imports a and a.b too
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return found & modules.keys()

    chains = {name: [name] for name in reached_by(entry, "app")}
    todo = list(chains)
    while todo:
        name = todo.pop()
        for other in reached_by(modules[name], name) - chains.keys():
            chains[other] = [*chains[name], other]
            todo.append(other)
    return chains


def left_out_modules(package: Path) -> set[str]:
    """The dotted names of the modules BUILD_TIME_ONLY removes from `package`."""
    modules = module_files(package)
    out = set()
    for entry in BUILD_TIME_ONLY:
        target = package / entry
        out.update(name for name, path in modules.items() if path == target or target in path.parents)
    return out


def test_every_entry_of_the_list_names_something_in_the_package():
    for entry in BUILD_TIME_ONLY:
        assert (PACKAGE / entry).exists(), entry


def test_nothing_the_handler_imports_is_left_out_of_the_package():
    modules = module_files(PACKAGE)
    chains = run_time_modules(modules, HANDLER)
    needed = [" -> ".join(chains[name]) for name in sorted(chains.keys() & left_out_modules(PACKAGE))]
    assert not needed, f"run time imports what the function package leaves out: {needed}"
    # The graph is not vacuous: it reaches the request path, lazy imports included.
    assert {"toolsearch.app", "toolsearch.server.endpoint", "toolsearch.model.load"} <= chains.keys()
    assert "toolsearch.auth.jwt_validation" in chains  # imported inside a function of app.py


def test_everything_left_out_is_unused_at_run_time_and_the_rest_is_used():
    # What is left out is exactly what the handler cannot reach, so the list is not longer than it
    # should be (nothing shipped that nothing imports, bar package markers) nor shorter.
    modules = module_files(PACKAGE)
    unreached = modules.keys() - run_time_modules(modules, HANDLER).keys()
    assert unreached == left_out_modules(PACKAGE)


def test_a_run_time_module_importing_a_left_out_one_is_caught(tmp_path):
    # The defect the graph exists for, on a copy: a lazy import of the CLI from the endpoint.
    package = tmp_path / "toolsearch"
    for path in module_files(PACKAGE).values():
        target = package / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    endpoint = package / "server/endpoint.py"
    endpoint.write_text(
        endpoint.read_text(encoding="utf-8")
        + "\n\ndef _oops():\n    from ..cli.main import main\n\n    return main\n",
        encoding="utf-8",
    )
    chains = run_time_modules(module_files(package), HANDLER)
    assert chains["toolsearch.cli.main"][-2:] == ["toolsearch.server.endpoint", "toolsearch.cli.main"]


# The handler run from the built package alone: a fresh interpreter without site (so no editable
# install puts a shared/ on the path) and without PYTHONPATH, with the function folder first and the
# venv's third-party packages after it (the makefile's pip is a stand-in here).
RUNNER = """
import json, sys
function, site_packages, events, out = sys.argv[1:5]
sys.path[:0] = [function]
sys.path.extend(site_packages.split(":"))
import importlib.util
from pathlib import Path

class Context:
    aws_request_id = "7f9c0e3a-0000-4000-8000-000000000001"
    function_name = "toolsearch-proxy"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:toolsearch-proxy"
    function_version = "$LATEST"
    def get_remaining_time_in_millis(self):
        return 30000

spec = importlib.util.spec_from_file_location("app", Path(function) / "app.py")
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
answers = {}
for path in sorted(Path(events).glob("*.json")):
    answers[path.name] = app.handler(json.loads(path.read_text()), Context())
app.loop.settle(timeout=30)
loaded = {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
          if name.split(".")[0] == "toolsearch"}
Path(out).write_text(json.dumps({"answers": answers, "loaded": loaded, "path": sys.path,
                                 "hybrid": app.embedder is not None}))
"""


@pytest.fixture(scope="module")
def built_function(tmp_path_factory) -> tuple[Path, Path, str]:
    """The function and the model layer as `sam build` leaves them (pip a stand-in); the build log."""
    tmp = tmp_path_factory.mktemp("sam")
    python, _log = python_without_pip(tmp)
    function = sam_build_folder(tmp, "arm64")
    built = make(FUNCTION_MAKEFILE, "build-ProxyFunction", python, function, MODEL_DIR=str(BUNDLED_MODEL))
    assert built.returncode == 0, built.stdout + built.stderr
    layer = function.parent / "ModelLayer"
    layer.mkdir()
    layered = make(LAYER_MAKEFILE, "build-ModelLayer", python, layer, MODEL_DIR=str(BUNDLED_MODEL))
    assert layered.returncode == 0, layered.stdout + layered.stderr
    return function, layer / "model", built.stdout


def test_the_build_leaves_out_the_list_and_says_how_much_it_ships(built_function):
    function, _model, log = built_function
    package = function / "toolsearch"
    for entry in BUILD_TIME_ONLY:
        assert not (package / entry).exists(), entry
    assert (package / "app.py").is_file() and (package / "model" / "load.py").is_file()
    assert "lines) shipped" in log and "left out as build-time only" in log


def test_the_trimmed_package_answers_every_event_alone(built_function, tmp_path):
    function, model, _log = built_function
    out = tmp_path / "answers.json"
    paths = sysconfig.get_paths()
    site_packages = ":".join(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLSEARCH_", "PYTHON"))}
    env.update(TOOLSEARCH_MODEL_DIR=str(model), POWERTOOLS_METRICS_NAMESPACE="ToolsearchTest")
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", RUNNER, str(function), site_packages, str(EVENTS), str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(out.read_text())

    assert not [p for p in report["path"] if Path(p) in (ROOT, ROOT / "shared", PACKAGE.parent)]
    assert all(str(file).startswith(str(function)) for file in report["loaded"].values() if file)
    assert not report["loaded"].keys() & left_out_modules(PACKAGE)
    assert report["hybrid"]  # the model from the layer loaded, with fetch, prepare and manifest gone

    answers = report["answers"]
    assert sorted(answers) == sorted(p.name for p in EVENTS.glob("*.json")) and len(answers) == 12
    for name, response in answers.items():
        assert response["statusCode"] == 200, (name, response)
        body = response["body"]
        if response.get("isBase64Encoded"):
            body = base64.b64decode(body)
        reply = json.loads(body)
        assert "result" in reply and "error" not in reply, (name, reply)
        if name.endswith("-search-tools.json"):
            assert reply["result"]["isError"] is False and reply["result"]["structuredContent"]["tools"]
        if name.endswith("-tools-list.json"):
            assert len(reply["result"]["tools"]) == 5
