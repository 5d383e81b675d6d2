"""The committed development model (shared/toolsearch/data/model) loads offline with model2vec.

It is built by tools/devmodel (from the base tools/devmodel/base builds); these tests need only the committed
files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from model2vec import StaticModel

MODEL_DIR = Path(__file__).resolve().parent.parent / "shared" / "toolsearch" / "data" / "model"


@pytest.fixture(scope="module")
def model(monkeypatch_module: pytest.MonkeyPatch) -> StaticModel:
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    return StaticModel.from_pretrained(str(MODEL_DIR))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_files_are_the_model2vec_layout_with_licence_notes():
    names = {path.name for path in MODEL_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "LICENSE"} <= names
    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert config["model_type"] == "model2vec"
    assert config["normalize"] is True
    assert "MIT" in (MODEL_DIR / "LICENSE").read_text()


def test_shape_and_dtype(model: StaticModel):
    assert model.embedding.dtype == np.int8
    assert model.embedding.shape == (130_000, 256)
    assert model.tokens[model.unk_token_id] == "<unk>"


def test_full_stops_are_tokens_not_dropped_as_unknown(model: StaticModel):
    # skeletoken 0.6.1 pointed unk_id at "." and model2vec drops unknown tokens; the build fixes it.
    with_stop, without = model.tokenize(["Send the report.", "Send the report"])
    assert len(with_stop) == len(without) + 1


def test_rare_lithuanian_word_splits_into_kept_pieces(model: StaticModel):
    # The trimmed Unigram vocabulary still covers Lithuanian letters, so nothing becomes <unk>.
    encoding = model.tokenizer.encode("Išsiųsti užsakymą įmonės sąskaitą", add_special_tokens=False)
    assert model.unk_token_id not in encoding.ids
    assert len(encoding.ids) >= 4


def test_vectors_are_unit_length_and_say_something(model: StaticModel):
    vectors = model.encode(["send an email", "send a message", "delete the production database"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    email, message, database = vectors
    assert email @ message > email @ database + 0.2


def test_text_without_known_tokens_is_a_zero_vector(model: StaticModel):
    vector = model.encode([""])[0]
    assert not np.any(vector)
