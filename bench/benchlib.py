"""What the benchmark commands share: the method line, percentiles, JSON output, catalogs, queries.

Catalogs are in the demo catalog's style (shared/toolsearch/data/catalog; its
size and domains are in docs/benchmarks.md). Smaller sizes take an even spread
of the demo tools; larger ones add copies of them as an aggregating gateway
would list several instances of a server: each copy's name gets an instance
prefix (`eu_qbo_get_profit_and_loss`), its description a sentence naming the
instance, and a deterministic share of its optional parameters is dropped. So
every tool's text differs (no embedding is shared by accident) while the
vocabulary stays that of real tools.

Queries are the evaluation set's questions (data/questions), English and
Lithuanian, which the generated catalogs can answer.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import platform
import resource
import statistics
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "shared" / "toolsearch" / "data"
MODEL_DIR = DATA / "model"

INSTANCES = (
    *("eu", "acme", "us", "globex", "staging", "initech", "apac", "umbrella", "prod", "hooli"),
    *("dev", "stark", "lab", "wayne", "emea", "tyrell", "latam", "cyberdyne", "sandbox", "wonka"),
)
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
PACKAGES = ("numpy", "rank-bm25", "model2vec", "starlette", "httpx", "uvicorn", "tiktoken", "tokenizers")


# -- the method line


def method_line(sizes: Sequence[int] = (), **extra: Any) -> dict[str, Any]:
    """Machine, Python, package versions, BLAS environment and sizes: printed first, kept in the JSON."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    info = {
        "machine": f"{platform.machine()} {_cpu_name()} x{os.cpu_count()}, {_memory_gib():.0f} GiB",
        "python": platform.python_version(),
        "packages": versions,
        "env": {k: os.environ.get(k, "unset") for k in BLAS_ENV},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "sizes": list(sizes),
        **extra,
    }
    packages = " ".join(f"{k}={v}" for k, v in versions.items() if v)
    env = " ".join(f"{k}={v}" for k, v in info["env"].items())
    load = "/".join(f"{x:g}" for x in info["load_average"])
    print(f"# method: {info['machine']}, load {load}; Python {info['python']}; {packages}; {env}")
    if sizes:
        print(f"# sizes: {', '.join(f'{s:,}' for s in sizes)}")
    for key, value in extra.items():
        print(f"# {key}: {value}")
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return 0.0


def write_json(path: str | None, method: dict[str, Any], results: Any) -> None:
    if path:
        Path(path).write_text(json.dumps({"method": method, "results": results}, indent=2) + "\n")
        print(f"# wrote {path}")


# -- statistics


def peak_rss_mib() -> float:
    """This process's own peak RSS. Not ru_maxrss: Linux carries the parent's high-water mark at
    fork through exec into it, so a child of a big parent reported the parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_bench_embedder(folder: Path, lexical_only: bool = False) -> tuple[Any, str]:
    """The model for hybrid figures and its label; (None, label) without one or with lexical_only."""
    if lexical_only or not (folder / "model.safetensors").exists():
        return None, "none (lexical only)"
    from toolsearch.model.load import load_embedder

    embedder = load_embedder(folder)
    return embedder, f"{folder} (dim {embedder.dim})"


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank: a real sample, never an interpolation."""
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def p50_p99_ms(seconds: Sequence[float]) -> tuple[float, float]:
    return statistics.median(seconds) * 1e3, percentile(seconds, 99) * 1e3


def growth(rows: Sequence[dict[str, Any]], key: str, size_key: str = "size") -> list[dict[str, Any]]:
    """Each step's ratio of `key` and of size, and the local exponent (log ratio / log size ratio)."""
    import math

    steps = []
    for before, after in itertools.pairwise(rows):
        if not before[key] or not after[key]:
            continue
        ratio = after[key] / before[key]
        size_ratio = after[size_key] / before[size_key]
        steps.append(
            {
                "from": before[size_key],
                "to": after[size_key],
                "size_ratio": size_ratio,
                "ratio": ratio,
                "exponent": math.log(ratio) / math.log(size_ratio),
            }
        )
    return steps


def print_growth(title: str, steps: list[dict[str, Any]]) -> None:
    """Exponent 1 is linear in the catalog's size, 0 is flat: where it jumps, the curve bends."""
    print(
        f"growth of {title}: "
        + "; ".join(
            f"{s['from']:,}->{s['to']:,} x{s['ratio']:.2f}"
            f" (size x{s['size_ratio']:.2f}, exp {s['exponent']:.2f})"
            for s in steps
        )
    )


# -- catalogs and queries


def demo_definitions() -> list[dict[str, Any]]:
    """The demo catalog's definitions, as copies a bench may change."""
    from toolsearch.server.demo import demo_tools

    return copy.deepcopy(list(demo_tools()))


def _variant(definition: dict[str, Any], instance: str, copy_number: int) -> dict[str, Any]:
    tool = copy.deepcopy(definition)
    tool["name"] = f"{instance}_{definition['name']}"
    label = instance.upper() if len(instance) <= 4 else instance.capitalize()
    tool["description"] = f"{definition.get('description', '')} Runs against the {label} instance."
    if tool.get("title"):
        tool["title"] = f"{tool['title']} ({label})"
    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    optional = [name for name in properties if name not in required]
    for position, name in enumerate(optional):
        if (position + copy_number) % 3 == 0:  # about a third of the optional parameters go
            del properties[name]
    return tool


def scaled_definitions(size: int) -> list[dict[str, Any]]:
    """`size` tool definitions in the demo catalog's style, the same for the same size."""
    base = demo_definitions()
    if size <= len(base):
        step = len(base) / size
        return [base[int(i * step)] for i in range(size)]
    tools = list(base)
    copy_number = 0
    while len(tools) < size:
        instance = INSTANCES[copy_number % len(INSTANCES)] + (
            str(copy_number // len(INSTANCES)) if copy_number >= len(INSTANCES) else ""
        )
        copy_number += 1
        for definition in base[: size - len(tools)]:
            tools.append(_variant(definition, instance, copy_number))
    return tools


def evaluation_queries() -> list[str]:
    """Every question of the evaluation set, English then Lithuanian, in file order."""
    from toolsearch.cli.evaluation import load_questions

    questions = load_questions()
    return [q.text[lang] for lang in ("en", "lt") for q in questions if lang in q.text]


def load_dev_embedder() -> Any:
    """The development model through the proxy's own loader, or None when it has not landed."""
    if not (MODEL_DIR / "model.safetensors").exists() and not any(MODEL_DIR.glob("*.safetensors")):
        return None
    from toolsearch.model.load import load_embedder

    return load_embedder(MODEL_DIR)


def add_tests_to_path() -> None:
    """The fixture servers live under tests/ (tests/fixtures), as pytest sees them."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
