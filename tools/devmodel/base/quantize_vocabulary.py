"""Cluster a model2vec model's vocabulary (model2vec's vocabulary quantization), to measure its cost.

model2vec can replace a model's token vectors by k k-means centroids plus a token -> centroid
mapping and per-token weights (``quantize_model(model, vocabulary_quantization=k)``). The proxy's
loader reads such a model (``mapping`` and ``weights`` tensors), but ``toolsearch fetch-model`` does
not offer to make one: on the evaluation set it costs more than it saves (README.md beside this
file has the figures). This script makes one so the cost can be measured again:

    tools/devmodel/base/venv.sh tools/devmodel/base/quantize_vocabulary.py shared/toolsearch/data/model \\
        .cache/devmodel/vocab-k2000 --clusters 2000
    cd /tmp && toolsearch eval --model-dir /work/main/.cache/devmodel/vocab-k2000

It runs model2vec's own k-means (scikit-learn, 10 random starts), as its users would get it.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from model2vec import StaticModel
from model2vec.model import quantize_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--clusters", type=int, required=True, help="k: rows left after clustering")
    args = parser.parse_args()

    model = StaticModel.from_pretrained(str(args.model_dir))
    started = time.perf_counter()
    clustered = quantize_model(model, vocabulary_quantization=args.clusters, quantize_to="float16")
    seconds = time.perf_counter() - started
    clustered.save_pretrained(str(args.out_dir))
    for path in args.out_dir.iterdir():  # safetensors writes 0600
        path.chmod(0o644)
    size = sum(p.stat().st_size for p in args.out_dir.iterdir() if p.is_file())
    print(
        json.dumps(
            {
                "clusters": args.clusters,
                "tokens": len(model.tokens),
                "seconds": round(seconds, 1),
                "mb_on_disk": round(size / 1e6, 1),
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
