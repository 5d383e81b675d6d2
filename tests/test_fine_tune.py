"""`toolsearch fine-tune`: the development model's recipe applied to another model2vec model.

Deployers run it on the production model once fetched; here it runs on a tiny real model2vec
folder (fixtures.model_helpers) and a tiny training set, and the result must load with the proxy's loader
and rank the requests' tools better than the base did.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixtures.model_helpers import make_model, make_tokenizer
from toolsearch.cli.main import main
from toolsearch.model.build.finetune import TrainingSet
from toolsearch.model.load import load_embedder

TOOLS = {
    "crm/create_invoice": "create invoice. create invoice for customer",
    "crm/refund_payment": "refund payment. refund payment to customer",
    "crm/list_orders": "list orders. list orders of customer",
    "chat/send_message": "send message. send message to user",
    "chat/search_messages": "search messages. search message history",
}
REQUESTS = [
    ("bill the client", "crm/create_invoice", "en"),
    ("give money back", "crm/refund_payment", "en"),
    ("what did the shopper buy", "crm/list_orders", "en"),
    ("ping my colleague", "chat/send_message", "en"),
    ("what was said before", "chat/search_messages", "en"),
    ("išrašyk sąskaitą", "crm/create_invoice", "lt"),
]
TRANSLATIONS = [("send message", "siųsti žinutę"), ("customer order", "kliento užsakymas")]
RECIPE = ["--epochs", "20", "--lr", "0.05", "--batch", "4", "--held-out-fraction", "0", "--pair-batch", "2"]


def _training_set(path: Path) -> TrainingSet:
    training = TrainingSet(TOOLS, {k: k.split("/")[0] for k in TOOLS}, REQUESTS, TRANSLATIONS)
    training.write(path)
    return training


def _words() -> list[str]:
    texts = [*TOOLS.values(), *(q for q, _, _ in REQUESTS), *(t for pair in TRANSLATIONS for t in pair)]
    return sorted({w.strip(".") for text in texts for w in text.lower().split()})


def _found(model_dir: Path) -> float:
    embedder = load_embedder(model_dir)
    keys = sorted(TOOLS)
    tools = embedder.encode([TOOLS[k] for k in keys])
    queries = embedder.encode([q for q, _, _ in REQUESTS])
    best = np.argmax(queries @ tools.T, axis=1)
    return float(np.mean([keys[b] == key for b, (_, key, _) in zip(best, REQUESTS, strict=True)]))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return make_model(tmp_path / "base", dim=16, tokenizer=make_tokenizer(_words()))


def test_fine_tune_writes_a_loadable_model_that_finds_the_requested_tools(tmp_path, base, capsys):
    data = tmp_path / "training-set.json"
    _training_set(data)
    out = tmp_path / "tuned"
    assert main(["fine-tune", "--base", str(base), "--data", str(data), "--out", str(out), *RECIPE]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["train"] == len(REQUESTS)
    assert _found(out) > _found(base) and _found(out) == 1.0
    assert json.loads((out / "config.json").read_text())["fine_tuned"]["recipe"]["epochs"] == 20
    assert (out / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()


def test_fine_tune_keeps_an_int8_model_int8(tmp_path, base):
    from safetensors.numpy import load_file, save_file

    from toolsearch.model.build.prepare import quantize_rows_int8

    vectors = load_file(str(base / "model.safetensors"))["embeddings"]
    values, scales = quantize_rows_int8(vectors)
    save_file({"embeddings": values, "weights": scales}, str(base / "model.safetensors"))
    data = tmp_path / "training-set.json"
    _training_set(data)
    out = tmp_path / "tuned"
    assert main(["fine-tune", "--base", str(base), "--data", str(data), "--out", str(out), *RECIPE]) == 0
    tensors = load_file(str(out / "model.safetensors"))
    assert tensors["embeddings"].dtype == np.int8 and tensors["weights"].shape == (len(vectors),)
    assert _found(out) > _found(base)


@pytest.mark.parametrize(
    "problem, message",
    [
        ("no-model", "no model.safetensors"),
        ("bad-data", "not a training set"),
        ("unknown-tool", "requests for tools it does not define"),
    ],
)
def test_fine_tune_refuses_what_it_cannot_use_with_a_message(tmp_path, base, capsys, problem, message):
    data = tmp_path / "training-set.json"
    _training_set(data)
    folder = base
    if problem == "no-model":
        folder = tmp_path / "empty"
        folder.mkdir()
    elif problem == "bad-data":
        data.write_text("{not json")
    else:
        spec = json.loads(data.read_text())
        spec["pairs"].append(["lost", "nowhere/tool", "en"])
        data.write_text(json.dumps(spec))
    out = tmp_path / "tuned"
    assert main(["fine-tune", "--base", str(folder), "--data", str(data), "--out", str(out), *RECIPE]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()
