"""The public benchmark (tools/searchbench): its data, its measures, and its smallest slice."""

from __future__ import annotations

import ast
import json

import pytest

from tools.searchbench.benchset import Request, Source, load_sources
from tools.searchbench.build import (
    HERE,
    _function_tool,
    agentdojo_tasks,
    merge_model_queries,
    read_lock,
    tau_tasks,
)
from tools.searchbench.measure import PlainBM25, measure
from tools.searchbench.run import evaluate
from toolsearch.catalogs.catalog import Catalog
from toolsearch.search import Hit
from toolsearch.search.embedder import load_configured_embedder

HELD_OUT = ("gorilla", "metatool", "livemcpbench", "icip-cas", "schema-guided", "dstc8")


def test_every_source_is_pinned_licensed_and_none_is_held_out():
    pins = read_lock()
    assert set(pins) == {
        "msc-bench",
        "stabletoolbench",
        "restbench",
        "api-bank",
        "seal-tools",
        "tooltalk",
        "agentdojo",
        "tau-bench",
    }
    for pin in pins.values():
        assert len(pin.commit) == 40 and pin.licence and pin.writer
        assert not any(word in pin.repo.lower() for word in HELD_OUT)
    for source in load_sources():
        assert source.origin.split("@")[0] in {pin.repo for pin in pins.values()}
        assert source.licence in {pin.licence for pin in pins.values()}


def test_requests_name_catalog_tools_and_no_tool_is_labelled_in_both_splits():
    sources = load_sources()
    assert {s.split for s in sources} == {"dev", "test"}
    assert sum(len(s.requests) for s in sources) >= 1700
    by_name: dict[str, dict[str, set[str]]] = {}
    for source in sources:
        names = {tool["name"] for tool in source.tools}
        phrased = [bool(r.model_queries) for r in source.requests]
        assert all(phrased) or not any(phrased), source.name  # a source awaiting them has none yet
        for request in source.requests:
            assert request.tools <= names and request.text
            assert len(request.model_queries) <= 5
        labelled = set().union(*(r.tools for r in source.requests))
        by_name.setdefault(source.name, {})[source.split] = labelled
    for name, splits in by_name.items():
        if len(splits) == 2:  # one catalog, split by server: a server's tools are labelled once
            servers = {split: {tool.split("-")[0] for tool in tools} for split, tools in splits.items()}
            assert not servers["dev"] & servers["test"], name


def test_every_request_awaiting_a_models_queries_is_listed_for_the_writers_with_its_text():
    listed = {}
    for path in sorted((HERE / "queries").glob("requests_for_queries*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            assert set(item) == {"source", "key", "request"}  # never a label or a tool's name
            listed[(item["source"], item["key"])] = item["request"]
    for source in load_sources():
        for request in source.requests:
            if not request.model_queries:
                assert listed.get((source.name, request.id)) == request.text, (source.name, request.id)


AGENTDOJO_TASKS = """
_NAME = "Sarah"
task_combinator.create_combined_task("UserTask9", task_suite.user_tasks["user_task_1"])


@task_suite.register_user_task
class UserTask0(BaseUserTask):
    _DAY = "2024-05-26"
    PROMPT = f"Am I free on {_DAY}? If so, book lunch " \
        "with " + _NAME + "."

    def ground_truth(self, pre_environment):
        return [
            FunctionCall(function="get_day_calendar_events", args={"day": self._DAY}),
            FunctionCall(function="create_calendar_event", args={}),
        ]


@task_suite.register_user_task
class UserTask1(BaseUserTask):
    PROMPT = f"Add {', '.join(['a', 'b'])} to it."

    def ground_truth(self, pre_environment):
        return [FunctionCall(function="add_participants", args={})]


class NotATask(BaseUserTask):
    PROMPT = "never listed"
"""


def test_agentdojo_tasks_are_read_from_their_source_not_run():
    """A prompt over literal names is joined; one built by code, or a task not registered, is left out."""
    got = list(agentdojo_tasks(AGENTDOJO_TASKS))
    assert got == [
        (
            "UserTask0",
            "Am I free on 2024-05-26? If so, book lunch with Sarah.",
            ["get_day_calendar_events", "create_calendar_event"],
        )
    ]


def test_an_agentdojo_function_becomes_a_tool_without_the_state_the_runtime_injects():
    source = '''
def send_email(
    inbox: Annotated[Inbox, Depends("inbox")],
    recipients: list[str],
    subject: str,
    cc: list[str] | None = None,
) -> Email:
    """Sends an email with the given `body`.

    :param recipients: The list with the email addresses
    of the recipients.
    :param subject: The subject of the email.
    """
'''
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.FunctionDef)
    assert _function_tool("workspace-send_email", node) == {
        "name": "workspace-send_email",
        "description": "Sends an email with the given `body`.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "recipients": {
                    "type": "array",
                    "description": "The list with the email addresses of the recipients.",
                },
                "subject": {"type": "string", "description": "The subject of the email."},
                "cc": {"type": "array"},
            },
            "required": ["recipients", "subject"],
        },
    }


def test_tau_bench_tasks_give_their_instruction_and_the_calls_in_order():
    source = """
TASKS = [
    Task(
        annotator="0",
        instruction="You are Mia   in 19122. You want to return  the lamp.",
        actions=[
            Action(name="find_user_id_by_name_zip", kwargs={}),
            Action(name="return_delivered_order_items", kwargs={}),
        ],
        outputs=[],
    ),
    Task(annotator="1", instruction=f"{x}", actions=[], outputs=[]),
]
"""
    assert list(tau_tasks(source)) == [
        (
            "You are Mia in 19122. You want to return the lamp.",
            ["find_user_id_by_name_zip", "return_delivered_order_items"],
        )
    ]


def test_the_conversational_dev_sources_label_what_the_user_asks_not_the_look_ups():
    by_name = {s.name: s for s in load_sources("dev")}
    tau = by_name["tau-bench"]
    labelled = set().union(*(r.tools for r in tau.requests))
    assert not labelled & {"retail-find_user_id_by_name_zip", "retail-find_user_id_by_email", "retail-think"}
    assert len(tau.requests) == 193 and len(tau.tools) == 30
    dojo = by_name["agentdojo"]
    assert len(dojo.requests) == 85 and len(dojo.tools) == 74
    assert {name.split("-")[0] for r in dojo.requests for name in r.tools} == {
        "workspace",
        "travel",
        "banking",
        "slack",
    }


def test_a_models_queries_are_merged_onto_their_requests_and_the_rest_are_skipped(tmp_path):
    tools = [{"name": "a", "description": "Adds an alarm."}]
    requests = [
        {"split": "dev", "id": "1", "text": "wake me at six", "tools": ["a"]},
        {"split": "dev", "id": "2", "text": "an alarm please", "tools": ["a"]},
    ]
    file = tmp_path / "made.json"
    made = {"source": "made", "origin": "o/r@c", "licence": "MIT", "writer": "w", "tools": tools}
    file.write_text(json.dumps({**made, "requests": requests}), encoding="utf-8")
    queries = tmp_path / "model_queries.jsonl"
    lines = [
        {"source": "made", "key": "1", "queries": ["add alarm", " ", "q2", "q3", "q4", "q5", "q6"]},
        {"source": "made", "key": "9", "queries": ["no such request"]},
    ]
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")

    assert merge_model_queries(tmp_path, queries) == 0

    (source,) = load_sources("dev", tmp_path)
    first, second = source.requests
    assert first.model_queries == ("add alarm", "q2", "q3", "q4", "q5")
    assert second.model_queries == ()
    tool_set = Catalog.from_definitions(tools)
    assert measure(source, tool_set, Fixed([0]), "fixed", "model").requests == 1  # only the phrased one
    assert measure(source, tool_set, Fixed([0]), "fixed", "raw").requests == 2


class Fixed:
    """A search that answers every query with the same order."""

    def __init__(self, order: list[int]) -> None:
        self.order = order

    def search(self, queries, limit):
        return [[Hit(p, 1.0) for p in self.order[:limit]] for _ in queries]


def test_measures_count_ranks_needs_and_alternatives():
    tools = [{"name": n, "description": ""} for n in ("a", "b", "c", "d", "e", "f")]
    catalog = Catalog.from_definitions(tools)
    requests = [
        Request("1", "x", (("a",),), ("x",)),  # first
        Request("2", "x", (("c",),), ("x",)),  # third
        Request("3", "x", (("f",), ("b",)), ("x",)),  # a task of two needs: b second, f sixth
        Request("4", "x", (("e", "b"),), ("x",)),  # one need, two tools meet it: b second
    ]
    source = Source("s", "dev", "MIT", "o/r@c", "w", tools, requests)
    got = measure(source, catalog, Fixed([0, 1, 2, 3, 4, 5]), "fixed", "raw")
    assert (got.r1, got.r3, got.r5) == (0.25, 1.0, 1.0)
    assert got.mrr == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 2) / 4)
    assert got.coverage5 == pytest.approx((1 + 1 + 0.5 + 1) / 4)


def test_the_floor_is_plain_bm25_over_name_and_description():
    catalog = Catalog.from_definitions(
        [
            {"name": "send-mail", "description": "Sends an email."},
            {"name": "get_weather", "description": ""},
            {"name": "list_files", "description": "Lists the files of a folder."},
        ]
    )
    index = PlainBM25(catalog)
    assert [catalog.tools[h.position].name for h in index.search(["weather"], 5)[0]] == ["get_weather"]
    assert index.search(["sending"], 5) == [[]]  # no stemming: the floor is plain


# Measured with `python -m tools.searchbench --source restbench-tmdb` (bundled model), less two
# requests' worth (95 requests): a change to ranking that loses them on public data fails here.
TMDB_FLOORS = {
    # (search, asked): (R@1, R@5)
    ("bm25-floor", "raw"): (0.347, 0.600),
    ("hybrid", "raw"): (0.45, 0.74),  # seventh round: R@5 0.768 -> 0.747 (2 requests); the pool held
    ("lexical", "raw"): (0.44, 0.72),
    ("hybrid", "model"): (0.96, 0.98),
}


@pytest.fixture(scope="module")
def tmdb():
    sources = [s for s in load_sources("dev") if s.name == "restbench-tmdb"]
    figures = evaluate(sources, load_configured_embedder("model2vec"))
    return {(f.search, f.phrasing): f for f in figures}


@pytest.mark.parametrize("key", sorted(TMDB_FLOORS))
def test_the_smallest_public_slice_holds_its_floors(tmdb, key):
    r1, r5 = TMDB_FLOORS[key]
    assert tmdb[key].r1 >= r1 - 0.0001 and tmdb[key].r5 >= r5 - 0.0001


def test_ours_beats_the_plain_floor_on_the_smallest_public_slice(tmdb):
    for asked in ("raw", "model"):
        assert tmdb[("hybrid", asked)].mrr > tmdb[("bm25-floor", asked)].mrr


def test_cross_fitting_takes_a_sources_cosines_from_its_own_model():
    from tools.searchbench.ranker import groups
    from toolsearch.search.rerank import FEATURES

    by_name = {s.name: s for s in load_sources("dev") if s.name in ("tooltalk", "restbench-tmdb")}
    model = load_configured_embedder("model2vec")
    assert model is not None
    cosine = FEATURES.index("cosine")
    crossed = {"tooltalk": model}
    own = groups([by_name["tooltalk"]], None, ("model",), per_source=crossed)
    same = groups([by_name["tooltalk"]], model, ("model",))
    assert own and all((a.matrix == b.matrix).all() for a, b in zip(own, same, strict=True))
    other = groups([by_name["restbench-tmdb"]], None, ("model",), per_source=crossed)
    assert other and not any(g.matrix[:, cosine].any() for g in other)  # no model given for it


def test_the_embedding_alone_is_measured_beside_the_others(tmdb):
    assert tmdb[("embedding", "model")].r5 > 0.5


def test_the_ranker_fit_puts_the_positives_first_and_loso_counts_best_ranks():
    import numpy as np

    from tools.searchbench.loso import Query, ranks, recall
    from tools.searchbench.ranker import Group, fit

    rng = np.random.default_rng(0)
    groups = []
    for _ in range(40):  # feature 0 tells the positive; feature 1 is noise
        matrix = rng.normal(size=(6, 2))
        positive = np.zeros(6, dtype=bool)
        positive[int(np.argmax(matrix[:, 0]))] = True
        groups.append(Group(matrix, positive))
    groups.append(Group(np.ones((3, 2)), np.ones(3, dtype=bool)))  # all positive: nothing to learn
    linear = fit(groups, steps=200)
    assert linear.weights[0] > 5 * abs(linear.weights[1])
    queries = [Query(("s", i // 2, "model"), g) for i, g in enumerate(groups[:40])]
    best = ranks(queries, linear)
    assert set(best.values()) == {1} and len(best) == 20  # two queries a request, each found first
    missing = Group(np.zeros((2, 2)), np.zeros(2, dtype=bool))
    best = ranks([*queries, Query(("s", 99, "model"), missing)], linear)
    assert best[("s", 99, "model")] == 0 and recall(best, 1, "model") == 20 / 21
    assert recall(best, 1, "raw") == 0.0


def test_the_measured_only_sources_are_scored_but_never_trained_on():
    import numpy as np

    from tools.searchbench import loso
    from tools.searchbench.ranker import MEASURED_ONLY, Group, trainable

    dev = load_sources("dev")
    assert {s.name for s in dev} >= MEASURED_ONLY  # a renamed source would silently be trained on
    assert not {s.name for s in trainable(dev)} & MEASURED_ONLY
    # A measured-only source whose features say the opposite of the others' must not move the fit.
    rng = np.random.default_rng(1)
    queries = []
    for i in range(30):
        for source, sign in (("seal-tools", 1.0), ("tooltalk", 1.0), ("tau-bench", -1.0)):
            matrix = rng.normal(size=(5, 1))
            positive = np.zeros(5, dtype=bool)
            positive[int(np.argmax(sign * matrix[:, 0]))] = True
            queries.append(loso.Query((source, i, "model"), Group(matrix, positive)))
    judged = loso.judge(queries)
    assert loso.recall(judged["dev"], 1, "model", "seal-tools") == 1.0
    assert loso.recall(judged["dev"], 1, "model", "tau-bench") < 0.5  # scored, by the others' fit
    assert judged["out"].keys() == judged["dev"].keys()


def test_loso_pools_the_trained_on_sources_apart_and_names_the_requests_that_moved(tmp_path):
    from tools.searchbench import loso

    # seal-tools trained on, found first; tau-bench measured only, missed: the judge's pool is 1.0.
    before = {
        "dev": {("seal-tools", 0, "raw"): 1, ("seal-tools", 1, "raw"): 3, ("tau-bench", 0, "raw"): 0},
        "out": {("seal-tools", 0, "raw"): 1, ("seal-tools", 1, "raw"): 3, ("tau-bench", 0, "raw"): 0},
    }
    table = loso.render(before)
    raw = {line[:18].strip(): line[18:].split()[2::3] for line in table.splitlines()[1:]}  # R@1, R@5
    assert raw["trained-on"] == ["0.500", "1.000", "0.500", "1.000"]
    assert raw["all dev"] == ["0.333", "0.667", "0.333", "0.667"]  # tau-bench's miss pooled in
    path = tmp_path / "ranks.jsonl"
    loso.write_ranks(before, path)
    assert loso.read_ranks(path) == before
    after = {name: dict(ranks) for name, ranks in before.items()}
    after["out"][("seal-tools", 1, "raw")] = 1  # up into the top 1
    after["out"][("seal-tools", 0, "raw")] = 6  # down out of the top 5
    up, down = ("seal-tools", 1, "raw"), ("seal-tools", 0, "raw")
    assert loso.moved(before["out"], after["out"], 1) == ([up], [down])
    assert loso.moved(before["out"], after["out"], 5) == ([], [("seal-tools", 0, "raw")])
    moves = loso.render_moves(before, after)
    assert "seal-tools         raw    +1 / -1   +0 / -1" in moves
    assert "tau-bench          raw    +0 / -0   +0 / -0" in moves
