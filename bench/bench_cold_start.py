"""Cold start of the Lambda handler: init (imports, model, app), first request, warm request, peak RSS.

    .venv/bin/python bench/bench_cold_start.py [--repeat 3] [--build /tmp/sam-x86]

Each case runs in a fresh process that loads functions/proxy/app.py as Lambda
does, then sends events/http-api-search-tools.json twice (the first lists the
demo upstream's 567 tools and indexes them; the second is warm). Cases:

  lexical      TOOLSEARCH_EMBEDDER=none (no model)
  dev          the development model (shared/toolsearch/data/model), or when it
               is absent a synthetic model of its shape (100,000 x 256 int8)
  production   a synthetic model of the production shape (potion-multilingual-128M
               prepared by `toolsearch fetch-model --int8`: 500,353 x 256 int8 + scales, and a
               Unigram tokenizer of 500,353 pieces)

Both models get the tokenizer's sidecar (tokenizer.unigram), as the layer build writes it;
--no-sidecar removes it. Synthetic models are built once under --work by bench/bench_model_load.py's
builder. With --build, the handler and its libraries come from a `sam build`
output folder instead of the venv (build it for this machine's architecture:
`sam build --parameter-overrides Architecture=x86_64 --build-dir DIR/build`, then
`--build DIR/build`), so the trimmed package and its
precompiled bytecode are what is timed. Model files are in the page cache
(warm disk); Lambda's first touch of the layer also reads from its storage.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

from benchlib import peak_rss_mib

ROOT = Path(__file__).resolve().parents[1]
BUNDLED_MODEL = ROOT / "shared" / "toolsearch" / "data" / "model"
EVENT = ROOT / "events" / "http-api-search-tools.json"
CONTEXT = types.SimpleNamespace(
    function_name="bench",
    memory_limit_in_mb=1024,
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:bench",
    aws_request_id="bench",
)


def child(handler_path: str) -> None:
    """In a fresh process: load the handler, invoke it twice, print figures as JSON."""
    started = time.perf_counter()
    import toolsearch.search.embedder as embedder_module

    real = embedder_module.load_configured_embedder
    model_s = []

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            model_s.append(time.perf_counter() - t)

    embedder_module.load_configured_embedder = timed
    spec = importlib.util.spec_from_file_location("bench_handler", handler_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    init = time.perf_counter() - started
    rss_init = peak_rss_mib()
    event = json.loads(EVENT.read_text())
    t = time.perf_counter()
    first = module.handler(event, CONTEXT)
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    second = module.handler(event, CONTEXT)
    warm_s = time.perf_counter() - t
    assert first["statusCode"] == 200 and second["statusCode"] == 200, (first, second)
    print(
        "BENCH "
        + json.dumps(
            {
                "init_s": init,
                "model_s": model_s[0] if model_s else 0.0,
                "first_request_s": first_s,
                "warm_request_s": warm_s,
                "rss_after_init_mib": rss_init,
                "peak_rss_mib": peak_rss_mib(),
                "search": "hybrid" if module.embedder is not None else "lexical",
            }
        ),
        flush=True,
    )


def model_folders(work: Path, sidecar: bool) -> dict[str, Path]:
    """The two models as the Lambda layer holds them: with the tokenizer's sidecar
    (layers/model/Makefile writes it), or, with --no-sidecar, without (as before it existed)."""
    import shutil

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_model_load import build

    from toolsearch.model.unigram import SIDECAR_NAME, write_sidecar

    dev = BUNDLED_MODEL if (BUNDLED_MODEL / "model.safetensors").is_file() else None
    if dev is None:
        dev = build(work / "dev-shape", None, 100_000, 256)["int8"]
    else:
        copy = work / "dev-model"
        if not (copy / "model.safetensors").is_file():
            shutil.copytree(dev, copy, dirs_exist_ok=True)
        dev = copy
    production = build(work / "prod-shape", None, 500_353, 256)["int8"]
    for folder in (dev, production):
        if sidecar:
            write_sidecar(folder)
        else:
            (folder / SIDECAR_NAME).unlink(missing_ok=True)
    return {"dev": dev, "production": production}


def run_case(env_extra: dict[str, str], build: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLSEARCH_", "AWS_"))}
    env.update(env_extra, POWERTOOLS_METRICS_DISABLED="true")
    if build is None:
        command = [sys.executable, __file__, "--child", str(ROOT / "functions" / "proxy" / "app.py")]
    else:
        # Only the build folder and the standard library: what Lambda's python3.13 has (boto3 aside).
        env["PYTHONPATH"] = str(build / "ProxyFunction")
        command = [sys.executable, "-s", __file__, "--child", str(build / "ProxyFunction" / "app.py")]
        env["BENCH_ISOLATED"] = "1"
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("BENCH ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"case failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("BENCH ") :])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/toolsearch-bench-model"))
    parser.add_argument("--build", type=Path, default=None, help="a `sam build` output folder")
    parser.add_argument(
        "--no-sidecar",
        action="store_true",
        help="models without the tokenizer's sidecar: the vocabulary is read from tokenizer.json",
    )
    parser.add_argument("--child", metavar="HANDLER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if os.environ.get("BENCH_ISOLATED"):
            sys.path[:] = [p for p in sys.path if "site-packages" not in p]
        child(args.child)
        return

    folders = model_folders(args.work, sidecar=not args.no_sidecar)
    cases = {
        "lexical (no model)": {"TOOLSEARCH_EMBEDDER": "none"},
        f"dev model ({folders['dev']})": {"TOOLSEARCH_MODEL_DIR": str(folders["dev"])},
        "production-shape int8": {"TOOLSEARCH_MODEL_DIR": str(folders["production"])},
    }
    source = f"sam build output {args.build}" if args.build else "the repository venv"
    tokenizer = "vocabulary from tokenizer.json" if args.no_sidecar else "vocabulary mapped from the sidecar"
    print(f"handler from {source}; {tokenizer}; best of {args.repeat} fresh processes; warm page cache")
    header = f"{'case':58} {'init s':>7} {'model s':>7} {'1st req s':>9} {'warm ms':>8} {'peak RSS MiB':>12}"
    print(header)
    for label, env in cases.items():
        runs = [run_case(env, args.build) for _ in range(args.repeat)]
        best = {k: min(r[k] for r in runs) for k in runs[0] if k != "search"}
        print(
            f"{label[:58]:58} {best['init_s']:7.2f} {best['model_s']:7.2f} {best['first_request_s']:9.2f} "
            f"{best['warm_request_s'] * 1000:8.1f} {best['peak_rss_mib']:12.0f}  ({runs[0]['search']})"
        )


if __name__ == "__main__":
    main()
