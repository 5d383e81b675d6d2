"""The development model's pipeline (tools/devmodel) end to end on a tiny fixture, in seconds.

Everything the full build reads has a small stand-in made here: a base model of a few hundred
pieces, MCP server packages whose scripts define tools, the synthetic requests for them, and
Debian packages holding a Lithuanian gettext catalog and WordNet files (built with dpkg-deb and
found in the downloads folder, so apt is never asked). The build must check every digest, train,
and write a model the proxy's loader reads, which finds the requests' tools better than the base.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import struct
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fixtures.model_helpers import make_model, make_tokenizer
from fixtures.required import unavailable
from tools.devmodel import build
from tools.devmodel.config import BuildConfig
from toolsearch.model.build.finetune import FineTuneConfig, TrainingSet
from toolsearch.model.load import load_embedder

if shutil.which("dpkg-deb") is None:
    unavailable("needs dpkg-deb (Debian)", module=True)

# Each server: tools (name, description) and, per tool, requests in other words (en) and Lithuanian.
SERVERS = {
    "billing-server": [
        (
            "create_invoice",
            "create invoice for customer",
            ["bill the client", "charge the buyer"],
            ["išrašyk sąskaitą"],
        ),
        (
            "refund_payment",
            "refund payment to customer",
            ["give the money back", "return cash"],
            ["grąžink pinigus"],
        ),
        (
            "list_orders",
            "list orders of customer",
            ["what did the shopper buy", "purchases so far"],
            ["pirkiniai"],
        ),
    ],
    "calendar-server": [
        ("create_event", "create calendar event", ["book a slot", "put on my schedule"], ["suplanuok laiką"]),
        (
            "delete_event",
            "delete calendar event",
            ["cancel the appointment", "drop the booking"],
            ["atšauk vizitą"],
        ),
    ],
    "chat-server": [
        ("send_message", "send message to user", ["ping my colleague", "tell the team"], ["parašyk kolegai"]),
        (
            "search_messages",
            "search message history",
            ["what was said before", "old chatter"],
            ["senos žinutės"],
        ),
    ],
    "files-server": [
        (
            "read_file",
            "read file in folder",
            ["open the document", "show the contents"],
            ["atidaryk dokumentą"],
        ),
        ("write_file", "write file to folder", ["save the document", "store the text"], ["išsaugok tekstą"]),
    ],
}
TRANSLATIONS = [
    ("send message", "siųsti žinutę"),
    ("delete file", "ištrinti failą"),
    ("open folder", "atverti aplanką"),
    ("create event", "sukurti įvykį"),
    ("customer order", "kliento užsakymas"),
]
WORDNET_DATA = (
    "00000001 00 v 02 cancel 0 call_off 0 000 | postpone indefinitely or annul something scheduled\n"
    "00000002 00 v 02 charge 0 bill 0 000 | demand payment\n"
)
WORDNET_INDEX = "cancel v 1 0 1 1 00000001\ncharge v 1 0 1 1 00000002\n"


def _words() -> list[str]:
    texts = [
        text
        for tools in SERVERS.values()
        for name, description, en, lt in tools
        for text in (name.replace("_", " "), description, *en, *lt)
    ]
    texts += [t for pair in TRANSLATIONS for t in pair] + ["call off", "postpone indefinitely or annul"]
    texts += ["something scheduled", "demand payment", "the", "my", "to", "of", "in", "for"]
    return sorted({w for text in texts for w in text.lower().split()})


def _package(folder: Path, server: str, tools: list) -> Path:
    """An npm-style package tarball whose script defines the tools as MCP servers write them."""
    script = "const tools = [\n" + "".join(
        f'  {{ name: "{name}", description: "{description}", inputSchema: {{}} }},\n'
        for name, description, _, _ in tools
    )
    script += "];\nserver.tool('ignored', 'short');\n"
    path = folder / f"{server}.tgz"
    with tarfile.open(path, "w:gz") as tar:
        data = script.encode()
        info = tarfile.TarInfo("package/dist/index.js")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def _mo(pairs: list[tuple[str, str]]) -> bytes:
    """A GNU gettext catalog (.mo) holding the pairs."""
    pairs = sorted([("", "Content-Type: text/plain; charset=UTF-8\n"), *pairs])
    originals = [en.encode() for en, _ in pairs]
    translations = [lt.encode() for _, lt in pairs]
    n = len(pairs)
    header = 7 * 4
    table = header + 16 * n
    data = b""
    offsets = []
    for text in originals + translations:
        offsets.append((len(text), table + len(data)))
        data += text + b"\0"
    out = struct.pack("<7I", 0x950412DE, 0, n, header, header + 8 * n, 0, 0)
    out += b"".join(struct.pack("<2I", *o) for o in offsets[:n])
    out += b"".join(struct.pack("<2I", *o) for o in offsets[n:])
    return out + data


def _deb(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    root = folder / f"{name}-root"
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: test <t@example.org>\n"
        "Description: fixture\n"
    )
    path = folder / f"{name}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--build", "--root-owner-group", str(root), str(path)], check=True, capture_output=True
    )
    shutil.rmtree(root)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fixture_config(tmp_path: Path) -> BuildConfig:
    base = make_model(tmp_path / "base", dim=16, tokenizer=make_tokenizer(_words()))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    packages = tmp_path / "packages"
    packages.mkdir()
    lock_lines = []
    requests = tmp_path / "requests"
    requests.mkdir()
    lines = []
    for server, tools in SERVERS.items():
        package = _package(packages, server, tools)
        lock_lines.append(f"file packages/{package.name} {_sha(package)} MIT")
        lines.append(f"== file:{server}")
        for name, _, en, lt in tools:
            lines.append(" | ".join([name, "", en[0], en[1], lt[0]]))
    (tmp_path / "sources.lock").write_text("\n".join(lock_lines) + "\n")
    (requests / "fixture.txt").write_text("# synthetic\n" + "\n".join(lines) + "\n")

    gettext_deb = _deb(
        downloads, "fixture-l10n", "1.0", {"usr/share/locale/lt/LC_MESSAGES/app.mo": _mo(TRANSLATIONS)}
    )
    (tmp_path / "gettext.lock").write_text(f"fixture-l10n=1.0 {_sha(gettext_deb)}\n")
    wordnet_deb = _deb(
        downloads,
        "fixture-wordnet",
        "1.0",
        {
            "usr/share/wordnet/data.verb": WORDNET_DATA.encode(),
            "usr/share/wordnet/index.verb": WORDNET_INDEX.encode(),
        },
    )
    (tmp_path / "wordnet.lock").write_text(f"fixture-wordnet=1.0 {_sha(wordnet_deb)}\n")

    return BuildConfig(
        cache_dir=tmp_path / "cache",
        out_dir=tmp_path / "out",
        base_dir=base,
        base_files={
            name: _sha(base / name) for name in ("config.json", "model.safetensors", "tokenizer.json")
        },
        sources_lock=tmp_path / "sources.lock",
        requests_dir=requests,
        gettext_lock=tmp_path / "gettext.lock",
        wordnet_lock=tmp_path / "wordnet.lock",
        downloads_dir=downloads,
        train=FineTuneConfig(
            epochs=15, lr=0.05, batch=4, hard_negatives=1, held_out_fraction=0.0, pair_batch=4
        ),
    )


def _top1(model_dir: Path, training: TrainingSet) -> float:
    embedder = load_embedder(model_dir)
    keys = sorted(training.tools)
    tools = embedder.encode([training.tools[k] for k in keys])
    queries = embedder.encode([q for q, _, _ in training.pairs])
    best = np.argmax(queries @ tools.T, axis=1)
    return float(np.mean([keys[b] == key for b, (_, key, _) in zip(best, training.pairs, strict=True)]))


def test_the_whole_pipeline_builds_a_model_that_finds_the_tools(fixture_config: BuildConfig):
    report = build.run(fixture_config)
    out = fixture_config.out_dir
    assert out is not None
    summary = report["training_set"]
    assert summary["servers"] == 4 and summary["tools"] == 9
    assert summary["requests"] == {"user": 18, "lt": 9}
    assert summary["translation_pairs"] == len(TRANSLATIONS)
    assert summary["paraphrase_pairs"] == 4  # two definitions, two synonym pairs

    training = TrainingSet.read(next(fixture_config.cache_dir.glob("training-set-*/training-set.json")))
    assert training.tools["billing-server/create_invoice"] == "create invoice. create invoice for customer"
    before = _top1(fixture_config.base_dir, training)
    after = _top1(out, training)
    assert after > before and after >= 0.9
    config = json.loads((out / "config.json").read_text())
    assert config["fine_tuned"]["recipe"]["epochs"] == 15
    assert all((out / name).stat().st_mode & 0o044 == 0o044 for name in ("model.safetensors", "config.json"))


def test_a_rerun_reuses_every_step_and_a_changed_input_rebuilds_its_steps(fixture_config: BuildConfig):
    build.run(fixture_config)
    steps = sorted(p.name for p in fixture_config.cache_dir.iterdir() if p.is_dir())
    stamps = {p.name: p.stat().st_mtime_ns for p in fixture_config.cache_dir.iterdir() if p.is_dir()}
    build.run(fixture_config)
    assert {p.name: p.stat().st_mtime_ns for p in fixture_config.cache_dir.iterdir() if p.is_dir()} == stamps

    extra = fixture_config.requests_dir / "more.txt"
    extra.write_text("== file:chat-server\nsend_message | drop a line\n")
    build.run(fixture_config)
    rebuilt = sorted(p.name for p in fixture_config.cache_dir.iterdir() if p.is_dir())
    new = set(rebuilt) - set(steps)
    assert {name.split("-")[0] for name in new} == {"training", "model"}


def test_a_package_that_does_not_match_its_digest_stops_the_build(fixture_config: BuildConfig):
    lock = fixture_config.sources_lock
    first = lock.read_text().splitlines()[0].split()
    tampered = lock.parent / first[1]
    tampered.write_bytes(tampered.read_bytes() + b"\0")
    with pytest.raises(SystemExit, match="is not the pinned"):
        build.run(fixture_config)
    assert not list(fixture_config.cache_dir.glob("model-*"))


def test_a_base_model_that_does_not_match_its_digest_stops_the_build(fixture_config: BuildConfig):
    config = replace(fixture_config, base_files={**fixture_config.base_files, "tokenizer.json": "0" * 64})
    with pytest.raises(SystemExit, match="is not the pinned"):
        build.run(config)


def test_held_out_servers_are_searched_as_the_proxy_searches(fixture_config: BuildConfig, capsys):
    from tools.devmodel import heldout

    build.run(fixture_config)
    heldout.main(
        [
            str(fixture_config.out_dir),
            "--cache-dir",
            str(fixture_config.cache_dir),
            "--held-out-fraction",
            "1.0",  # every server
            "--requests-dir",
            str(fixture_config.requests_dir),
        ]
    )
    printed = capsys.readouterr().out
    assert "held-out servers: 27 requests; catalog: 9 tools" in printed
    rows = {
        tuple(line.split()[:4])
        for line in printed.splitlines()
        if line.startswith(("lexical", "embedding", "hybrid"))
    }
    searches = {row[0] if row[0] != "hybrid" else f"hybrid {row[1]}" for row in rows}
    assert searches == {"lexical", "embedding"} | {f"hybrid w={w:.1f}" for w in heldout.WEIGHTS}


def test_public_pairs_join_the_training_set_and_rebuild_only_what_they_feed(fixture_config: BuildConfig):
    build.run(fixture_config)
    before = {p.name for p in fixture_config.cache_dir.iterdir() if p.is_dir()}
    public = TrainingSet(
        tools={
            "searchbench:s:mail/send": "send message. send message to user",  # a synthetic tool's text
            "searchbench:s:mail/read": "read message history",
        },
        servers={
            "searchbench:s:mail/send": "searchbench:s:mail",
            "searchbench:s:mail/read": "searchbench:s:mail",
        },
        pairs=[
            ("tell the team", "searchbench:s:mail/send", "en"),
            ("old chatter", "searchbench:s:mail/read", "en"),
        ],
    )
    path = fixture_config.cache_dir.parent / "public.json"
    public.write(path)
    report = build.run(replace(fixture_config, public_pairs=path))
    assert report["training_set"]["requests"] == {"user": 18, "lt": 9, "public": 2}
    new = {p.name for p in fixture_config.cache_dir.iterdir() if p.is_dir()} - before
    assert {name.split("-")[0] for name in new} == {"training", "model"}
    training = TrainingSet.read(
        Path(report["model_dir"]).parent
        / next(n for n in new if n.startswith("training"))
        / "training-set.json"
    )
    assert len(training.tools) == 10  # the same text is one tool, its own server's
    assert ("tell the team", "chat-server/send_message", "en") in training.pairs
    assert training.servers["searchbench:s:mail/read"] == "searchbench:s:mail"
