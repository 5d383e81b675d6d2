"""Build data/*.json from the pinned public sources in sources.lock.

Each source becomes MCP tool definitions (name, description, inputSchema) as a gateway would list
them, and labelled requests in the source's own words. Splits are by server, never by request:
each server goes to one split (a stable hash of its name) and a request goes where all the
servers of its needed tools go; a request whose servers straddle the two is left out, so no
server's tools are labelled in both splits. Where a source is large, a seeded
sample per split keeps the benchmark to minutes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .benchset import read_queries

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
LOCK = HERE / "sources.lock"
SAMPLE = 150  # requests per level (MSC-Bench) or per split (StableToolBench), seeded
SEED = 20261202


@dataclass(frozen=True)
class Pin:
    name: str
    repo: str
    commit: str
    licence: str
    writer: str


def read_lock(path: Path = LOCK) -> dict[str, Pin]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, repo, commit, licence, writer = line.split(maxsplit=4)
        pins[name] = Pin(name, repo, commit, licence, writer)
    return pins


class Repo:
    """Files of one repository at one commit, read from a bare clone (no work tree)."""

    def __init__(self, pin: Pin) -> None:
        self.pin = pin
        self.git_dir = self._git_dir()

    def _git_dir(self) -> Path:
        owner_name = self.pin.repo.replace("/", "+")
        if mirrors := os.environ.get("SEARCHBENCH_MIRRORS"):
            mirror = Path(mirrors) / owner_name / "repo"
            if mirror.is_dir():
                return mirror
        clone = ROOT / ".cache" / "searchbench" / owner_name
        if not clone.is_dir():
            url = f"https://github.com/{self.pin.repo}.git"
            subprocess.run(["git", "clone", "--bare", "--filter=blob:limit=8m", url, str(clone)], check=True)
        return clone

    def read(self, path: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={self.git_dir}", "show", f"{self.pin.commit}:{path}"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout

    def json(self, path: str) -> Any:
        return json.loads(self.read(path))

    def files(self, folder: str) -> list[str]:
        out = subprocess.run(
            [
                "git",
                f"--git-dir={self.git_dir}",
                "ls-tree",
                "--name-only",
                f"{self.pin.commit}",
                f"{folder}/",
            ],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        return sorted(out.split())


def slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:limit] or "x"


def split_of(server: str) -> str:
    return "dev" if hashlib.sha256(server.encode()).digest()[0] % 2 == 0 else "test"


def _one_split(request: dict) -> bool:
    """Whether every server of the request's needed tools is in one split."""
    return len({split_of(server) for server in request["servers"]}) == 1


def _kept(request: dict) -> dict:
    return {key: value for key, value in request.items() if key != "servers"}


def tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"name": name, "description": description.strip(), "inputSchema": schema}


def source_file(pin: Pin, name: str, tools: list[dict[str, Any]], requests: dict[str, list[Any]]) -> dict:
    """One catalog and its requests, each marked with its split."""
    return {
        "source": name,
        "origin": f"{pin.repo}@{pin.commit}",
        "licence": pin.licence,
        "writer": pin.writer,
        "tools": sorted(tools, key=lambda t: t["name"]),
        "requests": [{"split": split, **r} for split, items in requests.items() for r in items],
    }


def sample(items: list[Any], n: int, salt: str) -> list[Any]:
    if len(items) <= n:
        return items
    rng = random.Random(f"{SEED}:{salt}")
    return sorted(rng.sample(items, n), key=items.index)


# --- MSC-Bench: 491 real MCP servers from glama.ai, requests at four levels ------------------------


def msc_bench(pin: Pin) -> Iterator[dict]:
    repo = Repo(pin)
    registry = repo.json("data/mcp_registry.json")
    tools, names, server_of = [], {}, {}
    for server in registry["servers"]:
        prefix = slug(server["server_name"], 30)
        for entry in server.get("tools") or []:
            name = f"{prefix}-{slug(entry['tool_name'], 60)}"[:64]
            if name in server_of:
                continue
            tool_id = f"{server['server_name']}::{entry['tool_name']}"
            names[tool_id] = name
            server_of[name] = server["server_name"]
            schema = entry.get("input_schema") if isinstance(entry.get("input_schema"), dict) else {}
            schema = {k: v for k, v in schema.items() if k in ("type", "properties", "required")}
            tools.append(
                {
                    "name": name,
                    "description": entry.get("tool_description") or "",
                    "inputSchema": schema or {"type": "object"},
                }
            )
    by_split: dict[str, list[dict]] = {"dev": [], "test": []}
    for level in (1, 2, 3, 4):
        picked: dict[str, list[dict]] = {"dev": [], "test": []}
        for item in repo.json(f"data/queries/level_{level}.json"):
            truth = item["ground_truth_tools"]
            if level in (1, 3):  # each entry is a needed tool
                groups = [[t["tool_id"]] for t in truth]
            elif level == 2:  # alternative solutions: any of their tools meets the one need
                groups = [[t["tool_id"] for alt in truth for t in alt]]
            else:  # level 4: each entry a needed step, its tools alternatives
                groups = [[t["tool_id"] for t in alt] for alt in truth]
            needs = [[names[t] for t in group if t in names] for group in groups]
            if not needs or not all(needs):
                continue  # a needed tool the registry does not hold
            needs_out = [need[0] if len(need) == 1 else sorted(set(need)) for need in needs]
            request = {"id": f"L{level}-{item['query_id']}", "text": item["query"], "tools": needs_out}
            request["servers"] = {server_of[tool] for need in needs for tool in need}
            picked[split_of(server_of[needs[0][0]])].append(request)
        for split, items in picked.items():  # sampled first, so a sample stays what it was
            chosen = sample(items, SAMPLE, f"msc:{level}:{split}")
            by_split[split] += [_kept(r) for r in chosen if _one_split(r)]
    yield source_file(pin, "msc-bench", tools, by_split)


# --- StableToolBench: RapidAPI endpoints, ToolBench's solvable test queries -----------------------


def _rapid_params(api: dict) -> tuple[dict[str, Any], list[str]]:
    types = {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean"}
    properties, required = {}, []
    for kind in ("required_parameters", "optional_parameters"):
        for param in api.get(kind) or []:
            if not isinstance(param, dict) or not isinstance(param.get("name"), str):
                continue
            prop: dict[str, Any] = {"type": types.get(str(param.get("type", "")).lower(), "string")}
            if param.get("description"):
                prop["description"] = str(param["description"])
            properties[param["name"]] = prop
            if kind == "required_parameters":
                required.append(param["name"])
    return properties, required


def stabletoolbench(pin: Pin) -> Iterator[dict]:
    repo = Repo(pin)
    tools: dict[str, dict] = {}
    server_of: dict[str, str] = {}
    picked: dict[str, list[dict]] = {"dev": [], "test": []}
    for group in (
        "G1_category",
        "G1_instruction",
        "G1_tool",
        "G2_category",
        "G2_instruction",
        "G3_instruction",
    ):
        for item in repo.json(f"solvable_queries/test_instruction/{group}.json"):
            key_to_name = {}
            for api in item["api_list"]:
                name = f"{slug(api['tool_name'], 30)}-{slug(api['api_name'], 30)}"[:64]
                key_to_name[(api["tool_name"], api["api_name"])] = name
                if name not in tools:
                    properties, required = _rapid_params(api)
                    tools[name] = tool(name, api.get("api_description") or "", properties, required)
                    server_of[name] = api["tool_name"]
            needs = [key_to_name.get((t, a)) for t, a in item["relevant APIs"]]
            if not needs or not all(needs):
                continue
            request = {
                "id": f"{group}-{item['query_id']}",
                "text": item["query"],
                "tools": list(dict.fromkeys(needs)),
            }
            request["servers"] = {server_of[tool] for tool in needs if tool}
            picked[split_of(server_of[needs[0]])].append(request)
    samples = {  # sampled first, so a sample stays what it was
        split: [_kept(r) for r in sample(items, 2 * SAMPLE, f"stb:{split}") if _one_split(r)]
        for split, items in picked.items()
    }
    yield source_file(pin, "stabletoolbench", list(tools.values()), samples)


# --- RestBench: TMDB and Spotify, human-written instructions with gold API paths ------------------


def _resolve(spec: dict, node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def _openapi_tools(spec: dict) -> dict[str, dict]:
    """One tool per operation, keyed by "METHOD /path" as RestBench's solutions name them."""
    out = {}
    for path, item in spec["paths"].items():
        shared = item.get("parameters") or []
        for method in ("get", "post", "put", "delete", "patch"):
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            name = slug(op.get("operationId") or f"{method}_{path}", 64)
            properties, required = {}, []
            for param in [*shared, *(op.get("parameters") or [])]:
                param = _resolve(spec, param)
                if not isinstance(param, dict) or "name" not in param:
                    continue
                schema = _resolve(spec, param.get("schema") or {})
                prop = {"type": schema.get("type", "string") if isinstance(schema, dict) else "string"}
                if param.get("description"):
                    prop["description"] = str(param["description"]).strip()
                properties[param["name"]] = prop
                if param.get("required"):
                    required.append(param["name"])
            text = ". ".join(p.strip().rstrip(".") for p in (op.get("summary"), op.get("description")) if p)
            out[f"{method.upper()} {path}"] = tool(name, text, properties, required)
    return out


def restbench(pin: Pin) -> Iterator[dict]:
    repo = Repo(pin)
    for api, split in (("tmdb", "dev"), ("spotify", "test")):
        operations = _openapi_tools(repo.json(f"specs/{api}_oas.json"))
        requests = []
        for i, item in enumerate(repo.json(f"datasets/{api}.json")):
            needs = [operations[step]["name"] for step in item["solution"] if step in operations]
            if needs and len(needs) == len(item["solution"]):
                requests.append(
                    {"id": f"{api}-{i}", "text": item["query"], "tools": list(dict.fromkeys(needs))}
                )
        yield source_file(pin, f"restbench-{api}", list(operations.values()), {split: requests})


# --- API-Bank: 53 APIs, human-annotated dialogues (levels 1 and 2) --------------------------------

_IMPLIED = {"GetUserToken", "ToolSearcher"}  # steps the user never asks for: a token, the search itself


def _literals(body: list[ast.stmt], into: dict[str, object]) -> dict[str, object]:
    """Names bound to literals (or to strings built of earlier ones) in a module's or class's body."""
    for stmt in body:
        target, value = None, None
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            target, value = stmt.target.id, stmt.value
        if target is None or value is None:
            continue
        text = _string(value, into)
        if text is not None:
            into[target] = text
            continue
        try:
            into[target] = ast.literal_eval(value)
        except ValueError:
            continue
    return into


def _string(node: ast.expr, names: dict[str, object]) -> str | None:
    """A string written as a literal, a known name, an f-string over known names, or a sum; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and isinstance(names.get(node.id), str):
        return str(names[node.id])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string(node.left, names), _string(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            elif (
                isinstance(value, ast.FormattedValue)
                and value.format_spec is None
                and value.conversion == -1
                and isinstance(value.value, ast.Name)
                and isinstance(names.get(value.value.id), str | int | float)
            ):
                parts.append(str(names[value.value.id]))
            else:
                return None
        return "".join(parts)
    return None


def _api_bank_tools(repo: Repo) -> dict[str, dict]:
    out = {}
    for path in repo.files("api-bank/apis"):
        tree = ast.parse(repo.read(path))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = _literals(node.body, {})
            if not isinstance(fields.get("description"), str):
                continue
            params = fields.get("input_parameters") or {}
            properties = {
                key: {"type": "string", "description": str(value.get("description", ""))}
                for key, value in params.items()
                if isinstance(value, dict)
            }
            out[node.name] = tool(node.name, fields["description"], properties, list(properties))
    return out


def api_bank(pin: Pin) -> Iterator[dict]:
    repo = Repo(pin)
    tools = _api_bank_tools(repo)
    requests = []
    for folder in ("level-1-given-desc", "level-2-toolsearcher"):
        for path in repo.files(f"api-bank/lv1-lv2-samples/{folder}"):
            turns = [json.loads(line) for line in repo.read(path).splitlines() if line.strip()]
            said, needs = [], []
            for turn in turns:
                if turn.get("role") == "User" and not needs:
                    said.append(turn["text"])
                elif turn.get("role") == "API":
                    needs.append(turn["api_name"])
            wanted = [n for n in dict.fromkeys(needs) if n not in _IMPLIED and n in tools]
            if said and wanted:
                requests.append({"id": Path(path).stem, "text": " ".join(said), "tools": wanted})
    yield source_file(pin, "api-bank", list(tools.values()), {"test": requests})


# --- Seal-Tools: 4,076 self-instructed tools in 146 fields, requests of one or several calls -------

_SEAL_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


def seal_tools(pin: Pin) -> Iterator[dict]:
    """Each tool's top-level field ("Healthcare", "Non-profit") stands for its server."""
    repo = Repo(pin)
    tools, server_of = [], {}
    for line in repo.read("Seal-Tools_Dataset/tool.jsonl").splitlines():
        entry = json.loads(line)
        properties = {
            key: {
                "type": _SEAL_TYPES.get(str(value.get("type")), "string"),
                "description": value["description"],
            }
            if value.get("description")
            else {"type": _SEAL_TYPES.get(str(value.get("type")), "string")}
            for key, value in (entry.get("parameters") or {}).items()
            if isinstance(value, dict)
        }
        required = [key for key in entry.get("required") or [] if key in properties]
        tools.append(tool(entry["api_name"], entry.get("api_description") or "", properties, required))
        server_of[entry["api_name"]] = entry["field"].split("/")[0]
    picked: dict[tuple[str, str], list[dict]] = {}
    for part in ("dev", "test_in_domain", "test_out_domain"):
        for line in repo.read(f"Seal-Tools_Dataset/{part}.jsonl").splitlines():
            item = json.loads(line)
            needs = list(dict.fromkeys(call["api"] for call in item["calling"]))
            if not needs or not all(need in server_of for need in needs):
                continue
            request = {"id": item["id"], "text": item["query"], "tools": needs}
            request["servers"] = {server_of[need] for need in needs}
            if _one_split(request):
                kind = "one" if len(needs) == 1 else "several"
                picked.setdefault((split_of(server_of[needs[0]]), kind), []).append(request)
    by_split: dict[str, list[dict]] = {"dev": [], "test": []}
    for (split, kind), items in sorted(picked.items()):
        by_split[split] += [_kept(r) for r in sample(items, SAMPLE, f"seal:{kind}:{split}")]
    yield source_file(pin, "seal-tools", tools, by_split)


# --- ToolTalk: 28 tools in 7 plugins, hand-written conversations ----------------------------------

_TOOLTALK_IMPLIED = {"UserLogin"}  # the login a request needs when it asks for something else


def _tooltalk_tools(repo: Repo) -> dict[str, dict]:
    out = {}
    for path in repo.files("src/tooltalk/apis"):
        for node in ast.parse(repo.read(path)).body:
            if not isinstance(node, ast.ClassDef) or node.name.endswith("Suite"):
                continue
            fields = _literals(node.body, {})
            if not isinstance(fields.get("description"), str) or not isinstance(
                fields.get("parameters"), dict
            ):
                continue
            properties, required = {}, []
            for key, value in fields["parameters"].items():
                prop = {"type": str(value.get("type") or "string")}
                if value.get("description"):
                    prop["description"] = str(value["description"])
                properties[key] = prop
                if value.get("required"):
                    required.append(key)
            out[node.name] = tool(node.name, fields["description"], properties, required)
    return out


def tooltalk(pin: Pin) -> Iterator[dict]:
    """The user's words before the first call; the tools of that first call (less a login beside others)."""
    repo = Repo(pin)
    tools = _tooltalk_tools(repo)
    requests = []
    for folder in ("data/easy", "data/tooltalk"):
        for path in repo.files(folder):
            said, needs = [], []
            for turn in repo.json(path)["conversation"]:
                if turn["role"] == "user":
                    said.append(turn["text"])
                elif turn.get("apis"):
                    needs = [api["request"]["api_name"] for api in turn["apis"]]
                    break
            wanted = [n for n in dict.fromkeys(needs) if n in tools]
            if len(wanted) > 1:
                wanted = [n for n in wanted if n not in _TOOLTALK_IMPLIED]
            if said and wanted:
                requests.append({"id": Path(path).stem, "text": " ".join(said), "tools": wanted})
    yield source_file(pin, "tooltalk", list(tools.values()), {"dev": requests})


# --- AgentDojo: 74 tools in 4 suites (workspace, travel, banking, slack), hand-written user tasks ---

_AGENTDOJO = "src/agentdojo/default_suites/v1"
_AGENTDOJO_SUITES = ("workspace", "travel", "banking", "slack")
_PY_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}


def _annotation_type(node: ast.expr | None) -> str:
    if isinstance(node, ast.BinOp):  # `list[str] | None`: the first kind
        return _annotation_type(node.left)
    if isinstance(node, ast.Subscript):
        return _annotation_type(node.value)
    if isinstance(node, ast.Name):
        return _PY_TYPES.get(node.id, "string")
    return "string"


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """A Sphinx-style docstring's text before its `:param` lines, and each parameter's text."""
    head, params, current = [], {}, None
    for line in doc.splitlines():
        line = line.strip()
        if match := re.match(r":param (\w+):\s*(.*)", line):
            current = match.group(1)
            params[current] = match.group(2)
        elif line.startswith(":"):
            current = None
        elif current is not None:
            if line:
                params[current] += " " + line
        elif line:
            head.append(line)
    return " ".join(head), params


def _function_tool(name: str, node: ast.FunctionDef) -> dict[str, Any]:
    """A tool's definition from its Python function: the docstring, the arguments the caller fills."""
    description, described = _docstring_parts(ast.get_docstring(node) or "")
    args = node.args.args
    defaults = len(args) - len(node.args.defaults)
    properties, required = {}, []
    for i, arg in enumerate(args):
        annotation = arg.annotation
        if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "Annotated":
            continue  # the environment's state, injected by the runtime
        prop: dict[str, Any] = {"type": _annotation_type(annotation)}
        if described.get(arg.arg):
            prop["description"] = described[arg.arg]
        properties[arg.arg] = prop
        if i < defaults:
            required.append(arg.arg)
    return tool(name, description, properties, required)


def _ground_truth_calls(node: ast.ClassDef) -> list[str]:
    """The functions a user task's `ground_truth` calls, in order: `FunctionCall(function="...")`."""
    calls = []
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "ground_truth":
            for call in ast.walk(stmt):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "FunctionCall":
                    for keyword in call.keywords:
                        if keyword.arg == "function" and isinstance(keyword.value, ast.Constant):
                            calls.append(str(keyword.value.value))
    return calls


def agentdojo_tasks(source: str) -> Iterator[tuple[str, str, list[str]]]:
    """Each registered user task of one suite's module: its class name, PROMPT and ground-truth calls.

    A task whose PROMPT cannot be read as a literal (or an f-string over literal names) is left out,
    and so are tasks combined from others at run time (they are not classes).
    """
    tree = ast.parse(source)
    module = _literals(tree.body, {})
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(ast.unparse(d).endswith("register_user_task") for d in node.decorator_list):
            continue
        names = _literals(node.body, dict(module))
        prompt = names.get("PROMPT")
        calls = _ground_truth_calls(node)
        if isinstance(prompt, str) and prompt.strip() and calls:
            yield node.name, " ".join(prompt.split()), calls


def agentdojo(pin: Pin) -> Iterator[dict]:
    """Each suite stands for one server; every tool is named `suite-function`, as a gateway prefixes them."""
    repo = Repo(pin)
    functions: dict[str, ast.FunctionDef] = {}
    for path in repo.files(f"{_AGENTDOJO}/tools"):
        for node in ast.parse(repo.read(path)).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                functions[node.name] = node
    tools, requests = [], []
    for suite in _AGENTDOJO_SUITES:
        listed = re.search(
            r"^TOOLS = \[(.*?)^\]", repo.read(f"{_AGENTDOJO}/{suite}/task_suite.py"), re.M | re.S
        )
        names = re.findall(r"^\s*(\w+),", listed.group(1) if listed else "", re.M)
        tools += [_function_tool(f"{suite}-{name}", functions[name]) for name in names]
        for key, prompt, calls in agentdojo_tasks(repo.read(f"{_AGENTDOJO}/{suite}/user_tasks.py")):
            needs = [f"{suite}-{call}" for call in dict.fromkeys(calls) if call in names]
            if needs and len(needs) == len(set(calls)):
                requests.append({"id": f"{suite}-{key}", "text": prompt, "tools": needs})
    yield source_file(pin, "agentdojo", tools, {"dev": requests})


# --- tau-bench: retail (16 tools) and airline (14), hand-annotated customer scenarios --------------

_TAU_TASKS = {"retail": ("tasks_test", "tasks_dev", "tasks_train"), "airline": ("tasks_test",)}
# Steps a scenario needs but never asks for: who the user is, what their order or booking holds.
_TAU_IMPLIED = {
    "find_user_id_by_name_zip",
    "find_user_id_by_email",
    "get_user_details",
    "get_order_details",
    "get_reservation_details",
    "think",
    "calculate",
}
_TAU_IDENTITY = {"find_user_id_by_name_zip", "find_user_id_by_email"}


def _tau_tools(repo: Repo, domain: str) -> dict[str, dict]:
    """Each tool class's `get_info()`, a literal dict in the OpenAI function format."""
    out = {}
    for path in repo.files(f"tau_bench/envs/{domain}/tools"):
        for node in ast.walk(ast.parse(repo.read(path))):
            if isinstance(node, ast.FunctionDef) and node.name == "get_info":
                returned = next(s for s in node.body if isinstance(s, ast.Return))
                info = ast.literal_eval(returned.value)["function"]
                params = info.get("parameters") or {}
                out[info["name"]] = tool(
                    f"{domain}-{info['name']}",
                    info.get("description") or "",
                    params.get("properties") or {},
                    list(params.get("required") or []),
                )
    return out


def tau_tasks(source: str) -> Iterator[tuple[str, list[str]]]:
    """Each `Task(instruction=..., actions=[Action(name=...), ...])` of a task module, read, not run."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Task":
            fields = {k.arg: k.value for k in node.keywords}
            instruction = fields.get("instruction")
            actions = fields.get("actions")
            if not isinstance(instruction, ast.Constant) or not isinstance(actions, ast.List):
                continue
            names = []
            for action in actions.elts:
                if isinstance(action, ast.Call):
                    names += [
                        str(k.value.value)
                        for k in action.keywords
                        if k.arg == "name" and isinstance(k.value, ast.Constant)
                    ]
            yield " ".join(str(instruction.value).split()), names


def tau_bench(pin: Pin) -> Iterator[dict]:
    """The needed tools are the scenario's asks: its calls less the look-ups every task makes first.

    A scenario that asks only for a look-up keeps its calls less finding the user's id. Each
    domain is one server; the whole source is dev (30 tools: too few to split by server).
    """
    repo = Repo(pin)
    tools, requests = [], []
    for domain, files in _TAU_TASKS.items():
        by_name = _tau_tools(repo, domain)
        tools += list(by_name.values())
        seen, picked = set(), []
        for file in files:
            for i, (text, calls) in enumerate(tau_tasks(repo.read(f"tau_bench/envs/{domain}/{file}.py"))):
                if text in seen or not calls or not all(call in by_name for call in calls):
                    continue
                seen.add(text)
                asked = [c for c in dict.fromkeys(calls) if c not in _TAU_IMPLIED]
                asked = asked or [c for c in dict.fromkeys(calls) if c not in _TAU_IDENTITY]
                if asked:
                    needs = [by_name[c]["name"] for c in asked]
                    picked.append(
                        {"id": f"{domain}-{file.removeprefix('tasks_')}-{i}", "text": text, "tools": needs}
                    )
        requests += sample(picked, SAMPLE, f"tau:{domain}")
    yield source_file(pin, "tau-bench", tools, {"dev": requests})


BUILDERS: dict[str, Callable[[Pin], Iterator[dict]]] = {
    "msc-bench": msc_bench,
    "stabletoolbench": stabletoolbench,
    "restbench": restbench,
    "api-bank": api_bank,
    "seal-tools": seal_tools,
    "tooltalk": tooltalk,
    "agentdojo": agentdojo,
    "tau-bench": tau_bench,
}


def build_all(data: Path, only: list[str] | None = None) -> int:
    """Write each source's files, keeping the model queries already recorded for the same requests."""
    data.mkdir(parents=True, exist_ok=True)
    for name, pin in read_lock().items():
        if only and name not in only:
            continue
        for out in BUILDERS[name](pin):
            path = data / f"{out['source']}.json"
            if path.exists():
                old = {r["id"]: r for r in json.loads(path.read_text(encoding="utf-8"))["requests"]}
                for request in out["requests"]:
                    prior = old.get(request["id"])
                    if prior and prior.get("text") == request["text"] and prior.get("model_queries"):
                        request["model_queries"] = prior["model_queries"]
            path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            splits = ", ".join(
                f"{split} {sum(r['split'] == split for r in out['requests'])}" for split in ("dev", "test")
            )
            print(f"{path.name}: {len(out['tools'])} tools; requests {splits}")
    return 0


def merge_model_queries(data: Path, path: Path) -> int:
    """Put a model's first search_tools queries (JSON lines: source, key, queries) on their requests.

    A request keeps at most five; one the file does not name keeps what it had (none: its model
    phrasing is skipped, not failed).
    """
    given: dict[str, dict[str, list[str]]] = {}
    for (source, key), queries in read_queries(path).items():
        given.setdefault(source, {})[key] = list(queries)
    for source, by_key in sorted(given.items()):
        file = data / f"{source}.json"
        if not file.exists():
            print(f"{source}: no {file.name}, {len(by_key)} requests' queries not merged")
            continue
        raw = json.loads(file.read_text(encoding="utf-8"))
        merged = 0
        for request in raw["requests"]:
            if (queries := by_key.get(request["id"])) is not None:
                request["model_queries"] = queries
                merged += 1
        file.write_text(json.dumps(raw, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        without = sum(not r.get("model_queries") for r in raw["requests"])
        print(
            f"{file.name}: model queries for {merged} requests; {without} without; "
            f"{len(by_key) - merged} keys not found"
        )
    return 0
