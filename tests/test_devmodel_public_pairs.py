"""The public benchmark's dev requests as fine-tuning pairs (tools/devmodel/public_pairs.py)."""

from __future__ import annotations

from tools.devmodel.public_pairs import build
from tools.searchbench.benchset import Request, Source


def _source(name: str, split: str, tools: list[str], requests: list[Request]) -> Source:
    definitions = [
        {"name": t, "description": f"{t.replace('-', ' ')} tool", "inputSchema": {}} for t in tools
    ]
    return Source(name, split, "MIT", "o/r@c", "w", definitions, requests)


TOOLS = ["mail-send_email", "mail-read_inbox", "cal-add_event", "cal-list_events", "maps-route"]
DEV = _source(
    "msc-bench",
    "dev",
    TOOLS,
    [
        Request("1", "email Bob that I am late", (("mail-send_email",),), ("send email",)),
        Request(
            "2",
            "put lunch in my calendar and tell Ann",
            (("cal-add_event",), ("mail-send_email",)),
            ("add calendar event lunch", "send email to Ann"),
        ),
    ],
)
TEST = _source("msc-bench", "test", TOOLS, [Request("3", "how do I drive to Vilnius", (("maps-route",),))])


def test_dev_requests_pair_with_their_tools_and_test_requests_are_never_read():
    training = build([DEV, TEST], {})
    pairs = {(q, k.split("/")[-1]) for q, k, _ in training.pairs}
    assert pairs == {
        ("email Bob that I am late", "mail-send_email"),
        ("send email", "mail-send_email"),
        ("put lunch in my calendar and tell Ann", "cal-add_event"),
        ("put lunch in my calendar and tell Ann", "mail-send_email"),
        ("add calendar event lunch", "cal-add_event"),  # each query with the need it shares words with
        ("send email to Ann", "mail-send_email"),
    }
    assert all(lang == "en" for _, _, lang in training.pairs)
    assert not any("Vilnius" in q for q, _, _ in training.pairs)


def test_tools_are_the_dev_servers_and_their_server_gives_the_hard_negatives():
    training = build([DEV, TEST], {})
    names = {key.split("/")[-1] for key in training.tools}
    assert names == {"mail-send_email", "mail-read_inbox", "cal-add_event", "cal-list_events"}  # no maps
    assert training.servers["searchbench:msc-bench:mail/mail-read_inbox"] == "searchbench:msc-bench:mail"
    assert training.tools["searchbench:msc-bench:cal/cal-add_event"].startswith("cal add event")


def test_a_looked_up_server_is_used_where_the_names_carry_none():
    source = _source(
        "seal-tools", "dev", ["sendEmail", "readInbox"], [Request("1", "mail Bob", (("sendEmail",),))]
    )
    training = build([source], {"seal-tools": {"sendEmail": "Office", "readInbox": "Office"}})
    assert set(training.servers.values()) == {"searchbench:seal-tools:Office"}
    assert len(training.tools) == 2


def test_the_conversational_sources_servers_are_their_names_prefixes():
    for name in ("agentdojo", "tau-bench"):
        source = _source(
            name,
            "dev",
            ["banking-send_money", "slack-send_message"],
            [Request("1", "pay Ann", (("banking-send_money",),))],
        )
        training = build([source], {})
        assert set(training.servers.values()) == {f"searchbench:{name}:banking"}  # slack is no dev server
