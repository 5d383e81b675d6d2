"""What a build reads and how it trains: one dataclass, defaults for the committed model."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from toolsearch.model.build.finetune import FineTuneConfig

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# The development model before this pipeline (tools/devmodel/base's steps 1-7), as committed at BASE_COMMIT.
BASE_COMMIT = "fc160bbfdd55193c3ae578b9c9d157db1c7a5672"
BASE_PATH = "shared/toolsearch/data/model"
BASE_FILES = {
    "config.json": "73f74dde80c02f22e9649b7af9a295c81df826b9c76efa20eb16b26cf99685ee",
    "model.safetensors": "14ca47a7472afff76e05689f7c8b4e42a61dcd4ccf80d34e60fdaab2f974f958",
    "tokenizer.json": "9ad916ac17e4d326632a698c187e0b885692f5d4f8b713aa88a1203f3270c053",
}


@dataclass(frozen=True)
class BuildConfig:
    cache_dir: Path = ROOT / ".cache" / "devmodel-tool"
    out_dir: Path | None = ROOT / "shared" / "toolsearch" / "data" / "model"
    # The base model: a folder, or (when None) BASE_PATH at BASE_COMMIT read from git.
    base_dir: Path | None = None
    base_files: dict[str, str] = field(default_factory=lambda: dict(BASE_FILES))
    sources_lock: Path = HERE / "sources.lock"
    requests_dir: Path = HERE / "data" / "requests"
    gettext_lock: Path | None = HERE / "gettext-packages.lock"
    wordnet_lock: Path | None = HERE / "wordnet-packages.lock"
    # The public benchmark's dev requests as pairs (public_pairs.py writes the file); None: none.
    public_pairs: Path | None = None
    # Where npm tarballs and Debian packages are looked for before asking npm or apt (optional).
    downloads_dir: Path | None = None
    train: FineTuneConfig = field(default_factory=FineTuneConfig)
    force: bool = False
