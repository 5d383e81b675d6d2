"""The mapped Unigram vocabulary (toolsearch/model/unigram.py) cuts texts exactly as `tokenizers`.

The reference is `tokenizers` loading the same tokenizer.json in full. The bundled development
model's tokenizer is a real one (SentencePiece's precompiled normalizer, Metaspace, added
special tokens), so texts are drawn from the characters and literals that exercise it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from fixtures.model_helpers import make_model
from toolsearch.model.build.prepare import prepare_model
from toolsearch.model.load import StaticEmbedder, load_embedder
from toolsearch.model.unigram import (
    SIDECAR_NAME,
    SubVocabularyTokenizer,
    _LoadedVocabulary,
    _MappedVocabulary,
    write_sidecar,
)

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "shared" / "toolsearch" / "data" / "model"

TEXTS = st.lists(
    st.one_of(
        st.text(alphabet="abcdeklmnorstuyząčęėįšųūž ABCĄ.,!?'-_/0123456789\t\nﬁⅣé日本🙂", max_size=40),
        st.sampled_from(["<unk>", "<pad>", "<un", "k>", " ", "  ", "calendar", "kalendorius", "ﬁle"]),
    ),
    min_size=1,
    max_size=6,
).map("".join)


@pytest.fixture(scope="module")
def dev_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dev")
    shutil.copy(BUNDLED / "tokenizer.json", folder / "tokenizer.json")
    return folder


@pytest.fixture(scope="module")
def reference(dev_folder) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(dev_folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(512)
    return tokenizer


@pytest.fixture(scope="module")
def mapped(dev_folder) -> SubVocabularyTokenizer:
    assert write_sidecar(dev_folder) == dev_folder / SIDECAR_NAME
    tokenizer = SubVocabularyTokenizer.from_folder(dev_folder)
    assert isinstance(tokenizer.vocabulary, _MappedVocabulary)
    tokenizer.enable_truncation(512)
    return tokenizer


@pytest.fixture(scope="module")
def from_json(dev_folder, tmp_path_factory) -> SubVocabularyTokenizer:
    folder = tmp_path_factory.mktemp("json")
    shutil.copy(dev_folder / "tokenizer.json", folder / "tokenizer.json")
    tokenizer = SubVocabularyTokenizer.from_folder(folder)
    assert isinstance(tokenizer.vocabulary, _LoadedVocabulary)
    tokenizer.enable_truncation(512)
    return tokenizer


def ids(tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tokenizer.encode_batch_fast(texts, add_special_tokens=False)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, min_size=1, max_size=4))
def test_the_mapped_vocabulary_gives_the_ids_tokenizers_gives(reference, mapped, from_json, texts):
    expected = ids(reference, texts)
    assert ids(mapped, texts) == expected
    assert ids(from_json, texts) == expected


def test_known_cases_including_added_tokens_and_truncation(reference, mapped):
    texts = [
        "create a calendar event for tomorrow's meeting",
        "Sukurk įvykį kalendoriuje rytoj",
        "<unk> and <pad>x",
        "  double  spaces ",
        "",
        "word " * 700,  # past 512 tokens: truncated alike
    ]
    assert ids(mapped, texts) == ids(reference, texts)
    assert len(ids(mapped, texts)[-1]) == 512
    assert mapped.get_vocab_size() == reference.get_vocab_size()


def test_loading_reads_no_group_until_a_text_needs_it(dev_folder):
    # The cold start maps the file and reads its header; groups of pieces are decoded on use.
    tokenizer = SubVocabularyTokenizer.from_folder(dev_folder)
    vocabulary = tokenizer.vocabulary
    assert isinstance(vocabulary, _MappedVocabulary) and not vocabulary._groups
    tokenizer.encode_batch_fast(["calendar"])
    assert 0 < len(vocabulary._groups) < 40 < len(vocabulary._slots)


def test_a_sidecar_written_for_another_tokenizer_is_ignored(tmp_path, reference):
    make_model(tmp_path)  # a small Unigram tokenizer of the tests
    write_sidecar(tmp_path)
    shutil.copy(BUNDLED / "tokenizer.json", tmp_path / "tokenizer.json")  # replaced afterwards
    tokenizer = SubVocabularyTokenizer.from_folder(tmp_path)
    assert isinstance(tokenizer.vocabulary, _LoadedVocabulary)
    text = ["create a calendar event"]
    assert ids(tokenizer, text) == ids(reference, text)


def test_prepared_models_carry_the_sidecar_and_load_through_it(tmp_path):
    source = make_model(tmp_path / "source")
    out = prepare_model(source, tmp_path / "out", quantize="int8")
    assert (out / SIDECAR_NAME).is_file()
    embedder = load_embedder(out)
    assert isinstance(embedder, StaticEmbedder)
    assert isinstance(embedder.tokenizer, SubVocabularyTokenizer)
    assert isinstance(embedder.tokenizer.vocabulary, _MappedVocabulary)
