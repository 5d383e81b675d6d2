"""bench/bench_tasks.py end to end against a scripted model server: the harness, not a model's figures.

A real catalog upstream (the official MCP SDK), the real proxy in process, the SDK's client, and a
model server on loopback playing back recorded turns and usage (fixtures/scripted_model.py).
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
from pathlib import Path

import pytest

from fixtures.catalog_upstream import catalog_upstream
from fixtures.scripted_model import ScriptedModel, Step
from fixtures.servers import serve_in_thread

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-DO-NOT-LEAK-1f3a9c"

TOOLS = [
    {
        "name": "crm_get_contact",
        "description": "Get one CRM contact by ID.",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "crm_create_contact",
        "description": "Create a CRM contact.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
            "required": ["name"],
        },
    },
    {
        "name": "billing_refund_payment",
        "description": "Refund a payment, in full or in part.",
        "inputSchema": {
            "type": "object",
            "properties": {"payment_id": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["payment_id"],
        },
    },
    {
        "name": "billing_list_invoices",
        "description": "List invoices by status.",
        "inputSchema": {"type": "object", "properties": {"status": {"enum": ["open", "paid"]}}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "weather_get_forecast",
        "description": "Weather forecast for a city.",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "annotations": {"readOnlyHint": True},
    },
]
LOOKUP, ADD, REFUND, FOREVER = (
    "Look up contact C-17.",
    "Add Ada Lovelace as a contact.",
    "Refund payment P-9 and show me the open invoices.",
    "What will the weather be?",
)
REQUESTS = [
    {"id": "lookup", "text": LOOKUP, "tools": ["crm_get_contact"], "split": "dev"},
    {"id": "add", "text": ADD, "tools": [["crm_create_contact", "crm_get_contact"]], "split": "dev"},
    {
        "id": "refund",
        "text": REFUND,
        "tools": ["billing_refund_payment", "billing_list_invoices"],
        "split": "dev",
    },
    {"id": "forever", "text": FOREVER, "tools": ["weather_get_forecast"], "split": "test"},
]


def search(query: str) -> tuple[str, dict]:
    return ("search_tools", {"query": query})


SCRIPTS = {
    (LOOKUP, "proxy"): [
        Step([search("get contact")], input=1000, output=40, cached=500),
        Step(
            [("call_read_tool", {"name": "crm_get_contact", "arguments": {"id": "C-17"}})],
            input=1500,
            output=30,
        ),
        Step(text="Found C-17.", input=1700, output=10),
    ],
    (ADD, "proxy"): [
        Step([search("create contact")]),
        Step([("call_read_tool", {"name": "crm_create_contact", "arguments": {"name": "Ada"}})]),  # refused
        Step([("call_write_tool", {"name": "crm_create_contact", "arguments": {"name": "Ada"}})]),
        Step(text="Added."),
    ],
    (REFUND, "proxy"): [
        # The refund through call_read_tool is refused and never retried: that need stays unmet.
        Step([("call_read_tool", {"name": "billing_refund_payment", "arguments": {"payment_id": "P-9"}})]),
        Step([("call_read_tool", {"name": "billing_list_invoices", "arguments": {"status": "open"}})]),
        Step(
            [("call_read_tool", {"name": "weather_get_forecast", "arguments": {"city": "Vilnius"}})]
        ),  # wrong
        Step(text="Refunded."),
    ],
    (FOREVER, "proxy"): [Step([search("weather")]) for _ in range(10)],
    (LOOKUP, "all"): [
        Step([("crm_get_contact", {"id": "C-17"})], input=9000, output=25, cached=1000),
        Step(text="Done."),
    ],
    (REFUND, "all"): [
        Step([("billing_refund_payment", {"amount": "ten"})]),  # misses payment_id: does not fit
        Step([("billing_list_invoices", {"status": "open"})]),
        Step(text="Done."),
    ],
    (LOOKUP, "search"): [
        Step(searches=["crm_get_contact"], input=300, output=15),
        Step([("crm_get_contact", {"id": "C-17"})]),
        Step(text="Found it."),
    ],
}


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        yield importlib.import_module("bench_tasks")
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.fixture
def tasks_file(tmp_path):
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"tools": TOOLS, "requests": REQUESTS}))
    return path


@pytest.fixture
def model():
    scripted = ScriptedModel(dict(SCRIPTS))
    with serve_in_thread(scripted.app()) as base:
        yield scripted, base


@pytest.fixture
def upstream():
    with catalog_upstream(TOOLS) as running:
        yield running


class Sleeps(list):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


async def run(bench, *argv: str, sleep=None) -> int:
    return await bench.run(bench.parse_args(list(argv)), sleep=Sleeps() if sleep is None else sleep)


def rows(out: Path) -> dict[tuple[str, str], dict]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {(r["task"], r["mode"]): r for r in map(json.loads, lines)}


def common(tasks_file, out, base, upstream, provider="anthropic") -> list[str]:
    url = base + ("/v1" if provider == "openai" else "")
    return ["--provider", provider, "--base-url", url, "--tasks", str(tasks_file), "--out", str(out),
            "--upstream-url", upstream.url, "--model", "scripted"]  # fmt: skip


async def test_proxy_mode_plays_each_task_through_the_proxy_and_scores_it(
    bench, tasks_file, tmp_path, model, upstream, monkeypatch
):
    scripted, base = model
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    args = common(tasks_file, tmp_path, base, upstream)
    code = await run(
        bench, *args, "--modes", "proxy", "--max-turns", "4", "--prices", "input=3,output=15,cached=0.3"
    )
    assert code == 0
    got = rows(tmp_path)

    lookup = got["lookup", "proxy"]
    assert (lookup["status"], lookup["reached"], lookup["turns"], lookup["searches"]) == (
        "finished",
        True,
        3,
        1,
    )
    assert lookup["usage"] == {"input": 4200, "output": 80, "cached": 500, "cache_write": 0}
    assert lookup["cost_usd"] == pytest.approx((4200 * 3 + 80 * 15 + 500 * 0.3) / 1e6)

    add = got["add", "proxy"]  # a write through call_read_tool is refused, then made with call_write_tool
    assert (add["reached"], add["refused"], add["wrong"]) == (True, 1, 0)
    assert [(c["via"], c["refused"], c["error"]) for c in add["calls"]] == [
        ("call_read_tool", True, "not_read_only"),
        ("call_write_tool", False, ""),
    ]

    refund = got["refund", "proxy"]  # one need of two met (the refused one is not), a call no need names
    assert (refund["reached"], refund["coverage"], refund["wrong"], refund["refused"]) == (False, 0.5, 1, 1)

    forever = got["forever", "proxy"]  # keeps searching: stopped at the turn cap, scored as it stands
    assert (forever["status"], forever["turns"], forever["reached"]) == ("out_of_turns", 4, False)

    # The calls really went through the proxy to the upstream, the refused one never did.
    assert upstream.calls == [
        ("crm_get_contact", {"id": "C-17"}),
        ("crm_create_contact", {"name": "Ada"}),
        ("billing_list_invoices", {"status": "open"}),
        ("weather_get_forecast", {"city": "Vilnius"}),
    ]
    # The model got the proxy's five tools and, the turn after, the search's real answer.
    first, second = [r for r in scripted.requests if r.task == LOOKUP][:2]
    assert [t["name"] for t in first.body["tools"]] == list(bench.PROXY_TOOLS)
    result = second.body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "crm_get_contact" in result["content"]
    assert first.headers["x-api-key"] == KEY and "anthropic-beta" not in first.headers

    table = (tmp_path / "tasks.md").read_text()
    assert "model `scripted` (anthropic" in table and "| right tool reached | 50% |" in table


async def test_all_mode_over_the_openai_api_counts_cached_tokens_once(
    bench, tasks_file, tmp_path, model, upstream, monkeypatch
):
    scripted, base = model
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code = await run(
        bench, *common(tasks_file, tmp_path, base, upstream, "openai"), "--modes", "all", "--split", "dev"
    )
    assert code == 0
    got = rows(tmp_path)
    assert set(got) == {("lookup", "all"), ("add", "all"), ("refund", "all")}  # the dev split only
    lookup = got["lookup", "all"]
    assert lookup["reached"] and lookup["usage"] == {
        "input": 9100,
        "output": 45,
        "cached": 1000,
        "cache_write": 0,
    }
    refund = got["refund", "all"]  # the refund's arguments miss payment_id: called, but not reached
    assert refund["coverage"] == 0.5 and [c["fits"] for c in refund["calls"]] == [False, True]
    seen = next(r for r in scripted.requests if r.task == LOOKUP)
    assert seen.path == "/v1/chat/completions" and seen.headers["authorization"] == f"Bearer {KEY}"
    assert len(seen.body["tools"]) == len(TOOLS) and seen.body["tools"][0]["type"] == "function"
    assert ("crm_get_contact", {"id": "C-17"}) in upstream.calls  # straight to the upstream


async def test_anthropic_search_defers_every_tool_and_sends_the_beta(
    bench, tasks_file, tmp_path, model, upstream, monkeypatch
):
    scripted, base = model
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    code = await run(
        bench, *common(tasks_file, tmp_path, base, upstream), "--modes", "anthropic-search", "--limit", "1"
    )
    assert code == 0
    got = rows(tmp_path)
    assert set(got) == {("lookup", "anthropic-search-bm25"), ("lookup", "anthropic-search-regex")}
    bm25 = got["lookup", "anthropic-search-bm25"]
    assert (bm25["reached"], bm25["searches"], bm25["turns"]) == (True, 1, 3)
    first, second = [r for r in scripted.requests if r.body["tools"][0]["name"] == "tool_search_tool_bm25"][
        :2
    ]
    assert first.headers["anthropic-beta"] == "advanced-tool-use-2025-11-20"
    assert first.body["tools"][0] == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }
    assert all(t["defer_loading"] for t in first.body["tools"][1:]) and len(first.body["tools"]) == 6
    # The server-side search blocks go back in the history as they came.
    echoed = [b["type"] for b in second.body["messages"][1]["content"]]
    assert echoed == ["server_tool_use", "tool_search_tool_result"]


async def test_openai_provider_has_no_anthropic_search(bench, tasks_file, tmp_path, model, upstream):
    with pytest.raises(SystemExit, match="anthropic"):
        await run(
            bench, *common(tasks_file, tmp_path, model[1], upstream, "openai"), "--modes", "anthropic-search"
        )


async def test_the_spend_cap_stops_the_run_and_a_resume_skips_what_is_done(
    bench, tasks_file, tmp_path, model, upstream, monkeypatch, capsys
):
    scripted, base = model
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    args = [
        *common(tasks_file, tmp_path, base, upstream),
        "--modes",
        "proxy",
        "--prices",
        "input=1000,output=1000",
    ]
    # The cap is checked before each model call. The first task's turns cost $1.54, $1.53 and $1.71
    # (every token at $1,000 a million, cached ones too when no cached price is given): $4.78 in
    # all, past a $4.50 cap before the next task's first call.
    assert await run(bench, *args, "--max-spend", "4.5") == 3
    assert "stopped: spend cap of $4.50 reached ($4.7800 spent)" in capsys.readouterr().out
    assert set(rows(tmp_path)) == {("lookup", "proxy")}

    scripted.requests.clear()
    assert await run(bench, *args, "--max-spend", "1000", "--max-turns", "3") == 0
    assert "resuming: 1 task runs already" in capsys.readouterr().out
    assert {r.task for r in scripted.requests} == {ADD, REFUND, FOREVER}  # nothing sent for the done task
    assert len(rows(tmp_path)) == 4


async def test_rate_limits_are_retried_after_the_wait_the_server_asks(
    bench, tasks_file, tmp_path, model, upstream, monkeypatch
):
    scripted, base = model
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    scripted.fail_next = [429, 529]
    sleeps = Sleeps()
    argv = [*common(tasks_file, tmp_path, base, upstream), "--modes", "all", "--limit", "1"]
    assert await run(bench, *argv, sleep=sleeps) == 0
    assert sleeps == [0.0, 0.0]  # Retry-After: 0, twice
    assert rows(tmp_path)["lookup", "all"]["reached"]


async def test_a_dry_run_prints_the_requests_and_an_estimate_and_sends_nothing(
    bench, tasks_file, tmp_path, model, upstream, capsys, monkeypatch
):
    scripted, base = model
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # no key needed to look
    code = await run(
        bench, *common(tasks_file, tmp_path, base, upstream), "--dry-run", "--prices", "input=3,output=15"
    )
    out = capsys.readouterr().out
    assert code == 0 and scripted.requests == [] and not (tmp_path / "results.jsonl").exists()
    for mode in bench.MODES:
        assert f"## {mode}: POST {base}/v1/messages" in out
    assert "tools: 5: search_tools, describe_tool" in out
    assert "tools: 6 (5 with defer_loading): tool_search_tool_regex" in out
    assert "estimate for 4 tasks (not a measurement" in out
    assert re.search(r"\| all \| [\d,]+ \| 240 \| [\d,]+ \| [\d.]+ \|", out)


async def test_no_key_in_results_reports_or_logs(
    bench, tasks_file, tmp_path, model, upstream, monkeypatch, capsys, caplog
):
    scripted, base = model
    monkeypatch.setenv("BENCH_KEY", KEY)
    scripted.fail_next = [429]
    caplog.set_level(logging.DEBUG)
    argv = [
        *common(tasks_file, tmp_path, base, upstream),
        "--api-key-env",
        "BENCH_KEY",
        "--modes",
        "proxy,all",
    ]
    assert await run(bench, *argv) == 0
    assert scripted.requests and all(r.headers["x-api-key"] == KEY for r in scripted.requests)  # it was used
    printed = capsys.readouterr()
    written = [p.read_text(errors="replace") for p in tmp_path.iterdir() if p.suffix in (".jsonl", ".md")]
    for text in (printed.out, printed.err, caplog.text, *written):
        assert KEY not in text
    # And an API error that echoes the key is scrubbed before it is shown.
    provider = bench.Anthropic(None, base, KEY, "m", 10)
    assert KEY not in provider.redact(f"bad key {KEY}")


def test_the_evaluation_set_and_a_task_file_load(bench, tasks_file):
    evaluation = bench.load_taskset("eval", "all", "en", 30)
    assert len(evaluation.tasks) == 30 and len(evaluation.tools) > 500
    assert all(len(t.needs) == 1 for t in evaluation.tasks)  # a question's tools are alternatives of one need
    loaded = bench.load_taskset(str(tasks_file), "dev", "en", None)
    assert [t.needs for t in loaded.tasks][1:] == [
        (("crm_create_contact", "crm_get_contact"),),
        (("billing_refund_payment",), ("billing_list_invoices",)),
    ]


def test_the_docs_commands_parse(bench):
    lines = [
        line.strip().split()
        for path in (ROOT / "docs" / "benchmarks.md", ROOT / "bench" / "bench_tasks.py")
        for line in path.read_text().splitlines()
        if "bench/bench_tasks.py" in line and line.strip().startswith((".venv", "ANTHROPIC", "OPENAI"))
    ]
    assert len(lines) >= 4
    for argv in lines:
        start = next(i for i, word in enumerate(argv) if word.endswith("bench_tasks.py")) + 1
        args = bench.parse_args(
            [w for w in argv[start:] if not w.startswith("#")][: _before_comment(argv[start:])]
        )
        assert args.provider in ("anthropic", "openai")


def _before_comment(words: list[str]) -> int:
    return next((i for i, w in enumerate(words) if w.startswith("#")), len(words))
