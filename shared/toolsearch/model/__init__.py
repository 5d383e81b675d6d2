"""The embedding model: download it (`fetch`), shrink it for Lambda (`prepare`), load it (`load`).

Only `load` is needed at run time; `fetch` and `prepare` run at build time
(`toolsearch fetch-model`).
"""

from toolsearch.model.load import (
    Embedder,
    ModelLoadError,
    load_embedder,
    resolve_model_dir,
)

__all__ = [
    "Embedder",
    "ModelFetchError",
    "ModelLoadError",
    "fetch_model",
    "load_embedder",
    "prepare_model",
    "resolve_model_dir",
]


def __getattr__(name: str):
    # fetch and prepare pull in httpx and safetensors writing; a Lambda cold start needs neither.
    if name in ("fetch_model", "ModelFetchError"):
        from toolsearch.model import fetch

        return getattr(fetch, name)
    if name == "prepare_model":
        from toolsearch.model.prepare import prepare_model

        return prepare_model
    raise AttributeError(name)
