"""The makefiles `sam build` runs: the architecture SAM builds for, and Lambda's size limit.

The makefiles run for real, with a stand-in for pip (it records its arguments instead of
downloading wheels) and SAM's build graph written as `sam build` writes it (.aws-sam/build.toml).
A model too large for Lambda is a sparse file: its size counts, its bytes take no disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.sam_build import make, sam_build_folder
from fixtures.sam_build import python_without_pip as recording_pip

ROOT = Path(__file__).resolve().parents[1]
FUNCTION_MAKEFILE = ROOT / "functions" / "proxy" / "Makefile"
LAYER_MAKEFILE = ROOT / "layers" / "model" / "Makefile"
BUNDLED_MODEL = ROOT / "shared" / "toolsearch" / "data" / "model"


@pytest.fixture
def python_without_pip(tmp_path: Path) -> tuple[Path, Path]:
    """A PYTHON for the makefiles: pip's arguments go to a log, everything else runs for real."""
    return recording_pip(tmp_path)


def platforms(log: Path) -> set[str]:
    words = log.read_text().split()
    return {words[i + 1] for i, word in enumerate(words) if word == "--platform"}


@pytest.mark.parametrize(("architecture", "wheels"), [("x86_64", "x86_64"), ("arm64", "aarch64")])
def test_the_function_gets_wheels_for_the_architecture_sam_builds_for(
    tmp_path, python_without_pip, architecture, wheels
):
    python, log = python_without_pip
    artifacts = sam_build_folder(tmp_path, architecture)
    done = make(FUNCTION_MAKEFILE, "build-ProxyFunction", python, artifacts, MODEL_DIR=str(BUNDLED_MODEL))
    assert done.returncode == 0, done.stdout + done.stderr
    tags = platforms(log)
    assert tags and all(tag.endswith("_" + wheels) for tag in tags), tags
    assert (artifacts / "app.py").is_file() and (artifacts / "toolsearch" / "app.py").is_file()
    assert "bytes under Lambda's limit" in done.stdout


def test_lambda_arch_that_contradicts_sam_stops_the_build(tmp_path, python_without_pip):
    python, log = python_without_pip
    artifacts = sam_build_folder(tmp_path, "x86_64")
    done = make(FUNCTION_MAKEFILE, "build-ProxyFunction", python, artifacts, LAMBDA_ARCH="arm64")
    assert done.returncode != 0
    assert "building ProxyFunction for x86_64" in done.stderr and "LAMBDA_ARCH=arm64" in done.stderr
    assert not log.exists()  # nothing installed


def test_without_a_build_graph_lambda_arch_decides(tmp_path, python_without_pip):
    # The makefile run by hand (no sam build): the variable, as before.
    python, log = python_without_pip
    artifacts = sam_build_folder(tmp_path, None)
    done = make(
        FUNCTION_MAKEFILE,
        "build-ProxyFunction",
        python,
        artifacts,
        LAMBDA_ARCH="x86_64",
        MODEL_DIR=str(BUNDLED_MODEL),
    )
    assert done.returncode == 0, done.stderr
    assert all(tag.endswith("_x86_64") for tag in platforms(log))


def _big_model(folder: Path, size: int) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "model.safetensors", "wb") as f:
        f.truncate(size)  # sparse
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_a_layer_over_lambdas_limit_fails_with_its_size(tmp_path, python_without_pip):
    python, _log = python_without_pip
    model = _big_model(tmp_path / "float32", 520_000_000)
    layer = tmp_path / ".aws-sam" / "build" / "ModelLayer"
    layer.mkdir(parents=True)
    done = make(LAYER_MAKEFILE, "build-ModelLayer", python, layer, MODEL_DIR=str(model))
    assert done.returncode != 0
    assert "too large for Lambda" in done.stderr
    assert "model layer 520.0 MB" in done.stderr and "262,144,000" in done.stderr


def test_the_function_build_counts_the_model_the_layer_will_hold(tmp_path, python_without_pip):
    # Function and layer build at the same time (parallel = true): the function's check adds the
    # model the layer is built from. Here the function is the toolsearch package alone (pip is a
    # stand-in), about 1.7 MB, beside a model that fits alone but not with it.
    python, _log = python_without_pip
    model = _big_model(tmp_path / "too-big-together", 261_500_000)
    artifacts = sam_build_folder(tmp_path, "arm64")
    done = make(FUNCTION_MAKEFILE, "build-ProxyFunction", python, artifacts, MODEL_DIR=str(model))
    assert done.returncode != 0
    assert "too large for Lambda" in done.stderr and "model layer 261.5 MB" in done.stderr


def test_the_layer_holds_the_model_and_its_tokenizer_sidecar(tmp_path, python_without_pip):
    python, _log = python_without_pip
    layer = tmp_path / ".aws-sam" / "build" / "ModelLayer"
    layer.mkdir(parents=True)
    done = make(LAYER_MAKEFILE, "build-ModelLayer", python, layer, MODEL_DIR=str(BUNDLED_MODEL))
    assert done.returncode == 0, done.stderr
    built = {p.name for p in (layer / "model").iterdir()}
    assert {"model.safetensors", "tokenizer.json", "tokenizer.unigram"} <= built
    assert "bytes under Lambda's limit" in done.stdout
