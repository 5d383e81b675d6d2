"""fetch_model against a loopback server with the hub's URL layout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from fixtures.model_helpers import FakeHub, make_model
from toolsearch.model.build.fetch import fetch_model
from toolsearch.model.build.lock import DigestMismatchError, ModelFetchError, load_lock
from toolsearch.model.build.manifest import MANIFEST_NAME, read_manifest
from toolsearch.model.load import load_embedder, read_safetensors_header

REPO = "test-org/tiny-model"
REVISION = "0123456789abcdef0123456789abcdef01234567"
NAMES = ("config.json", "tokenizer.json", "model.safetensors", "README.md")


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict[str, bytes]:
    folder = make_model(tmp_path_factory.mktemp("source") / "tiny")
    return {name: (folder / name).read_bytes() for name in NAMES}


@pytest.fixture
def hub(model_files):
    server = FakeHub(REPO, REVISION, dict(model_files))
    server.endpoint = server.start()
    yield server
    server.stop()


def write_lock(path: Path, files: dict[str, bytes], *, digests: bool, **override: str | None) -> Path:
    entries = {
        name: {
            "required": name != "README.md",
            "sha256": hashlib.sha256(data).hexdigest() if digests else None,
            "size": len(data) if digests else None,
        }
        for name, data in files.items()
    }
    entries["LICENSE"] = {"required": False, "sha256": None, "size": None}  # not in this repo
    for name, digest in override.items():
        entries[name.replace("_", ".")]["sha256"] = digest
    path.write_text(json.dumps({"repo": REPO, "revision": REVISION, "license": "MIT", "files": entries}))
    return path


def fetch(hub: FakeHub, target: Path, lock: Path, **kwargs):
    kwargs.setdefault("progress", False)
    return fetch_model(target, hub.endpoint, lock_path=lock, backoff=0.001, **kwargs)


def assert_not_complete(folder: Path) -> None:
    assert read_manifest(folder) is None
    assert not (folder / MANIFEST_NAME).exists()


def test_good_download_is_verified_complete_and_loadable(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True)
    target = tmp_path / "model"

    assert fetch(hub, target, lock) == target

    for name, data in model_files.items():
        assert (target / name).read_bytes() == data
    assert not list(target.glob("*.part"))
    manifest = read_manifest(target)
    assert manifest["revision"] == REVISION
    assert (
        manifest["files"]["model.safetensors"]["sha256"]
        == hashlib.sha256(model_files["model.safetensors"]).hexdigest()
    )
    assert "LICENSE" not in manifest["files"]  # optional, and the repo has none
    # Every digest came from the lock, so the hub's API was only asked about the undigested LICENSE.
    assert all("/resolve/" in p or "/cdn/" in p or "/api/" in p for p in hub.paths())
    vectors = load_embedder(target).encode(["create calendar event", "sąskaita klientui"])
    assert vectors.shape == (2, 16)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    # A complete folder for the same revision is returned without touching the network.
    before = len(hub.requests)
    assert fetch(hub, target, lock) == target
    assert len(hub.requests) == before


def test_lock_digest_mismatch_names_file_and_digests_and_leaves_nothing_complete(hub, model_files, tmp_path):
    wrong = "0" * 64
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True, model_safetensors=wrong)
    target = tmp_path / "model"

    with pytest.raises(DigestMismatchError) as caught:
        fetch(hub, target, lock)

    error = caught.value
    actual = hashlib.sha256(model_files["model.safetensors"]).hexdigest()
    assert error.file == "model.safetensors"
    assert wrong in str(error) and actual in str(error) and "model.safetensors" in str(error)
    assert not (target / "model.safetensors").exists()
    assert not (target / "model.safetensors.part").exists()
    assert_not_complete(target)


def test_corrupt_bytes_fail_against_the_hubs_published_sha256(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=False)
    hub.corrupt.add("tokenizer.json")
    target = tmp_path / "model"

    with pytest.raises(DigestMismatchError) as caught:
        fetch(hub, target, lock)

    assert caught.value.file == "tokenizer.json"
    assert caught.value.expected == hub.sha256("tokenizer.json")
    assert caught.value.source == "hub api"
    assert not (target / "tokenizer.json").exists()
    assert_not_complete(target)


def test_interrupted_download_resumes_with_range(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True)
    half = len(model_files["model.safetensors"]) // 2
    hub.drop_after["model.safetensors"] = half
    target = tmp_path / "model"

    fetch(hub, target, lock)

    assert (target / "model.safetensors").read_bytes() == model_files["model.safetensors"]
    ranges = [(p, r) for m, p, r in hub.requests if p == "/cdn/model.safetensors"]
    assert ranges == [("/cdn/model.safetensors", None), ("/cdn/model.safetensors", f"bytes={half}-")]
    assert read_manifest(target) is not None


def test_a_broken_run_never_looks_complete_and_the_next_run_resumes(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True)
    cut = 1000
    hub.drop_after["model.safetensors"] = cut
    target = tmp_path / "model"

    with pytest.raises(ModelFetchError, match=r"model\.safetensors"):
        fetch(hub, target, lock, retries=0)

    assert_not_complete(target)
    assert not (target / "model.safetensors").exists()
    assert (target / "model.safetensors.part").stat().st_size == cut

    fetch(hub, target, lock)
    assert (target / "model.safetensors").read_bytes() == model_files["model.safetensors"]
    assert ("GET", "/cdn/model.safetensors", f"bytes={cut}-") in hub.requests
    assert read_manifest(target) is not None


def test_transient_server_errors_are_retried(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True)
    hub.fail_with["config.json"] = [503, 502]
    target = tmp_path / "model"

    fetch(hub, target, lock)

    assert (target / "config.json").read_bytes() == model_files["config.json"]
    assert hub.paths("GET").count(f"/{REPO}/resolve/{REVISION}/config.json") == 3


def test_lockless_fetch_is_verified_by_the_hub_api_and_updates_the_lock(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=False)
    target = tmp_path / "model"

    fetch(hub, target, lock, update_lock=True)

    assert f"/api/models/{REPO}/revision/{REVISION}" in hub.paths("GET")
    refreshed = {f.name: f for f in load_lock(lock).files}
    for name, data in model_files.items():
        assert refreshed[name].sha256 == hashlib.sha256(data).hexdigest()
        assert refreshed[name].size == len(data)
    assert refreshed["LICENSE"].sha256 is None
    # The refreshed lock alone is now enough: a fresh folder fetches without asking the API.
    hub.requests.clear()
    hub.api_enabled = False
    fetch(hub, tmp_path / "again", lock)
    assert hub.paths("HEAD") == [f"/{REPO}/resolve/{REVISION}/LICENSE"]  # the one file still undigested
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == model_files["model.safetensors"]


def test_without_the_api_the_resolve_headers_verify_the_files(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=False)
    hub.api_enabled = False
    target = tmp_path / "model"

    fetch(hub, target, lock)

    heads = hub.paths("HEAD")
    assert f"/{REPO}/resolve/{REVISION}/model.safetensors" in heads
    assert f"/{REPO}/resolve/{REVISION}/config.json" in heads
    for name, data in model_files.items():
        assert (target / name).read_bytes() == data


def test_without_the_api_a_non_lfs_file_is_checked_by_its_git_blob_id(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=False)
    hub.api_enabled = False
    hub.corrupt.add("config.json")
    target = tmp_path / "model"

    with pytest.raises(DigestMismatchError) as caught:
        fetch(hub, target, lock)

    assert caught.value.file == "config.json"
    assert caught.value.what == "git blob sha1"
    assert_not_complete(target)


def test_a_missing_required_file_is_a_clear_error(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=False)
    del hub.files["tokenizer.json"]

    with pytest.raises(ModelFetchError, match=r"tokenizer\.json.*not in"):
        fetch(hub, tmp_path / "model", lock)


def test_a_revision_the_lock_does_not_pin_is_verified_by_the_hub(model_files, tmp_path):
    other = "f" * 40
    server = FakeHub(REPO, other, dict(model_files))
    server.endpoint = server.start()
    try:
        lock = write_lock(tmp_path / "lock.json", model_files, digests=True, model_safetensors="0" * 64)
        fetch(server, tmp_path / "model", lock, revision=other, update_lock=True)
    finally:
        server.stop()
    refreshed = load_lock(lock)
    assert refreshed.revision == other
    by_name = {f.name: f for f in refreshed.files}
    assert by_name["model.safetensors"].sha256 == hashlib.sha256(model_files["model.safetensors"]).hexdigest()


def test_fetch_with_quantize_and_dims_prepares_a_loadable_smaller_model(hub, model_files, tmp_path):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True)
    target = tmp_path / "model"

    fetch(hub, target, lock, quantize="int8", dims=8)

    tensors = read_safetensors_header(target / "model.safetensors")
    assert tensors["embeddings"].dtype == np.int8 and tensors["embeddings"].shape[1] == 8
    manifest = read_manifest(target)
    assert manifest["prepared"] == {"quantize": "int8", "dims": 8}
    assert manifest["revision"] == REVISION
    assert read_manifest(tmp_path / "model.source") is not None  # the raw download, kept for re-preparing
    assert load_embedder(target).encode(["list invoices"]).shape == (1, 8)


@pytest.mark.parametrize(("quantize", "dims"), [("int4", None), (None, 0)])
def test_bad_options_are_refused_before_any_download(hub, model_files, tmp_path, quantize, dims):
    lock = write_lock(tmp_path / "lock.json", model_files, digests=True)
    with pytest.raises(ModelFetchError):
        fetch(hub, tmp_path / "model", lock, quantize=quantize, dims=dims)
    assert hub.requests == []


def test_unsafe_names_in_a_lock_are_refused(tmp_path):
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"repo": REPO, "revision": REVISION, "files": {"../evil": {"sha256": None}}}))
    with pytest.raises(ModelFetchError, match="unsafe"):
        load_lock(lock)


def test_the_shipped_lock_pins_the_production_model():
    lock = load_lock()
    assert lock.repo == "minishlab/potion-multilingual-128M"
    assert lock.revision == "73908c3438cf03b6a01bcb9611d62b23d0726f08"
    required = {f.name for f in lock.files if f.required}
    assert required == {"config.json", "tokenizer.json", "model.safetensors"}
    by_name = {f.name: f for f in lock.files}
    assert by_name["model.safetensors"].size == 500_353 * 256 * 4 + 88
