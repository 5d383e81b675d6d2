"""The build: base model, tool definitions, translation pairs, training set, fine-tuned model.

Each step is `steps.cached_step`: its folder is named by its inputs' digests, so a rerun reuses
what did not change.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from toolsearch.catalogs.catalog import Catalog
from toolsearch.model.build.finetune import TrainingSet, fine_tune
from toolsearch.search.embedding import embedding_text

from . import gettext_pairs, sources, wordnet_pairs
from . import requests as requests_module
from .config import BASE_COMMIT, BASE_PATH, ROOT, BuildConfig
from .requests import read_requests
from .steps import LOG, cached_step, check_digest, sha256_file

MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def base_model(config: BuildConfig) -> Path:
    """The model to start from, its files checked against their pinned digests."""

    def build(folder: Path) -> None:
        for name, digest in config.base_files.items():
            if config.base_dir is not None:
                shutil.copyfile(config.base_dir / name, folder / name)
            else:  # the committed development model at BASE_COMMIT
                blob = subprocess.run(
                    ["git", "show", f"{BASE_COMMIT}:{BASE_PATH}/{name}"],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                ).stdout
                (folder / name).write_bytes(blob)
            check_digest(folder / name, digest)

    return cached_step(config.cache_dir, "base", {"files": config.base_files}, build, force=config.force)


def tool_definitions(config: BuildConfig) -> Path:
    """tools.json: {server: {"licence", "package", "tools": [{name, title, description}]}}."""
    lock = sources.read_lock(config.sources_lock)
    downloads = config.downloads_dir or config.cache_dir / "downloads"

    def build(folder: Path) -> None:
        servers = {}
        for source in lock:
            tools = sources.tools_in_package(sources.fetch(source, downloads))
            LOG.info("%s: %d tools", source.spec, len(tools))
            servers[source.name] = {"package": source.spec, "licence": source.licence, "tools": tools}
        (folder / "tools.json").write_text(json.dumps(servers, ensure_ascii=False, indent=1) + "\n")

    key = {"sources": [asdict(s) | {"spec": Path(s.spec).name} for s in lock], "code": _code(sources)}
    return cached_step(config.cache_dir, "tools", key, build, force=config.force) / "tools.json"


def translation_pairs(config: BuildConfig) -> Path:
    """pairs.json: [[english, lithuanian], ...] from the pinned Debian packages' gettext catalogs."""

    def build(folder: Path) -> None:
        pairs = []
        if config.gettext_lock is not None:
            pairs = gettext_pairs.load_pairs(folder, config.gettext_lock, config.downloads_dir)
            for sub in ("align-debs", "align-mo"):  # the packages are kept in downloads, not in the step
                if config.downloads_dir is None or sub == "align-mo":
                    shutil.rmtree(folder / sub, ignore_errors=True)
        (folder / "pairs.json").write_text(json.dumps(pairs, ensure_ascii=False) + "\n")

    key = {
        "lock": sha256_file(config.gettext_lock) if config.gettext_lock else None,
        "code": _code(gettext_pairs),
    }
    return cached_step(config.cache_dir, "gettext", key, build, force=config.force) / "pairs.json"


def paraphrase_pairs(config: BuildConfig) -> Path:
    """lexicon.json: [[text, text meaning the same], ...] from WordNet (wordnet_pairs.py)."""

    def build(folder: Path) -> None:
        pairs = []
        if config.wordnet_lock is not None:
            pairs = wordnet_pairs.load_pairs(config.wordnet_lock, config.downloads_dir or folder / "debs")
            shutil.rmtree(folder / "debs", ignore_errors=True)
        (folder / "lexicon.json").write_text(json.dumps(pairs, ensure_ascii=False) + "\n")

    key = {
        "lock": sha256_file(config.wordnet_lock) if config.wordnet_lock else None,
        "code": _code(wordnet_pairs),
    }
    return cached_step(config.cache_dir, "wordnet", key, build, force=config.force) / "lexicon.json"


def training_set(config: BuildConfig, tools_path: Path, pairs_path: Path, lexicon_path: Path) -> Path:
    def build(folder: Path) -> None:
        servers = json.loads(tools_path.read_text())
        tools: dict[str, str] = {}
        server_of: dict[str, str] = {}
        key_of_text: dict[str, str] = {}
        alias: dict[str, str] = {}  # tools whose text another tool already has
        for server, entry in sorted(servers.items()):
            for tool in entry["tools"]:
                definition = {"name": tool["name"], "description": tool["description"], "inputSchema": {}}
                if tool.get("title"):
                    definition["title"] = tool["title"]
                text = embedding_text(Catalog.from_definitions([definition]).tools[0])
                key = f"{server}/{tool['name']}"
                if text in key_of_text:
                    alias[key] = key_of_text[text]
                    continue
                key_of_text[text] = key
                tools[key], server_of[key] = text, server
        pairs, missing = [], Counter()
        for request in read_requests(config.requests_dir):
            key = f"{request.server}/{request.tool}"
            key = alias.get(key, key)
            if key not in tools:
                missing[request.server] += 1
                continue
            pairs.append((request.text, key, request.kind))
        if missing:
            LOG.warning("requests for tools the packages did not yield (skipped): %s", dict(missing))
        kinds = Counter(kind for _, _, kind in pairs)
        align = [(en, lt) for en, lt in json.loads(pairs_path.read_text())]
        lexicon = [(a, b) for a, b in json.loads(lexicon_path.read_text())]
        requests = [(q, k, _language(kind)) for q, k, kind in pairs]
        if config.public_pairs is not None:  # the public benchmark's dev requests (public_pairs.py)
            public = TrainingSet.read(config.public_pairs)
            for key in sorted(public.tools):
                text = public.tools[key]
                if text in key_of_text:
                    alias[key] = key_of_text[text]
                    continue
                key_of_text[text] = key
                tools[key], server_of[key] = text, public.servers[key]
            requests += [(q, alias.get(k, k), lang) for q, k, lang in public.pairs]
            kinds["public"] = len(public.pairs)
        training = TrainingSet(tools, server_of, requests, align, lexicon)
        training.write(folder / "training-set.json")
        summary = {
            "servers": len(servers),
            "tools": len(tools),
            "tools_with_requests": len({k for _, k, _ in pairs}),
            "requests": dict(kinds),
            "translation_pairs": len(align),
            "paraphrase_pairs": len(lexicon),
            "licences": dict(Counter(entry["licence"] for entry in servers.values())),
        }
        (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    requests = {p.name: sha256_file(p) for p in sorted(config.requests_dir.glob("*.txt"))}
    key = {
        "tools": sha256_file(tools_path),
        "pairs": sha256_file(pairs_path),
        "lexicon": sha256_file(lexicon_path),
        "requests": requests,
        "code": _code(requests_module),
    }
    if config.public_pairs is not None:  # absent from the key otherwise: earlier builds keep their digests
        key["public"] = sha256_file(config.public_pairs)
    return cached_step(config.cache_dir, "training-set", key, build, force=config.force) / "training-set.json"


def _code(module) -> str:
    """A step's key includes the code that does it: a changed reader builds again."""
    return sha256_file(Path(module.__file__))


def _language(kind: str) -> str:
    return "lt" if kind == "lt" else "en"


def run(config: BuildConfig) -> dict[str, Any]:
    """The whole build; returns the fine-tuning report (also in the model's config.json)."""
    started = time.monotonic()
    config.cache_dir.mkdir(parents=True, exist_ok=True)
    base = base_model(config)
    training_path = training_set(
        config, tool_definitions(config), translation_pairs(config), paraphrase_pairs(config)
    )
    shutil.copyfile(training_path, config.cache_dir / "training-set.json")  # `toolsearch fine-tune --data`
    training = TrainingSet.read(training_path)
    report: dict[str, Any] = {}

    def build(folder: Path) -> None:
        report.update(fine_tune(base, folder, training, config.train, log=LOG.info))
        (folder / "report.json").write_text(json.dumps(report, indent=1) + "\n")

    key = {"base": config.base_files, "training": sha256_file(training_path), "train": asdict(config.train)}
    model = cached_step(config.cache_dir, "model", key, build, force=config.force)
    report = report or json.loads((model / "report.json").read_text())
    if config.out_dir is not None:
        config.out_dir.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:  # README.md and LICENSE there stay
            shutil.copyfile(model / name, config.out_dir / name)
            (config.out_dir / name).chmod(0o644)
        LOG.info("model written to %s", config.out_dir)
    summary = json.loads((training_path.parent / "summary.json").read_text())
    LOG.info("done in %.0f s", time.monotonic() - started)
    return report | {"model_dir": str(model), "training_set": summary}


def with_overrides(config: BuildConfig, **train: Any) -> BuildConfig:
    return replace(config, train=replace(config.train, **train))
