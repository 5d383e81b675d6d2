"""What mending upstream text that is not Unicode costs each answer the upstream client reads.

    .venv/bin/python bench/bench_surrogate_scan.py [--mb 7] [--rounds 5] [--json PATH]

Every JSON answer from the upstream is scanned for the escape of a UTF-16
surrogate (`\\ud800`-`\\udfff`) after it is parsed; only when one is there is
the parsed value walked and each lone surrogate replaced with U+FFFD
(`toolsearch.upstream.wire._json_object`). Printed, best of --rounds, for an
answer of about --mb MB: the parse alone, the scan, and the whole read, for
prose (no escapes), for text full of escapes, and for emoji escaped as
surrogate pairs (the walk runs, and finds nothing lone).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from benchlib import method_line, write_json


def _best(work: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _answer(text_unit: str, mb: float, ensure_ascii: bool) -> bytes:
    repeat = int(mb * 1e6 / len(json.dumps(text_unit, ensure_ascii=ensure_ascii)))
    rows = [{"id": i, "name": f"row {i}", "ok": True} for i in range(repeat // 20)]
    result = {"content": [{"type": "text", "text": text_unit * repeat}], "structuredContent": {"rows": rows}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, ensure_ascii=ensure_ascii).encode()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=7.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    from toolsearch.upstream.wire import _SURROGATE_ESCAPE, _json_object

    method = method_line(mb=args.mb, rounds=args.rounds)
    cases = {
        "prose": _answer("The quick brown fox jumps over the lazy dog. ", args.mb, False),
        "escapes": _answer('a "quoted" word\\n\ttab ', args.mb, False),
        "emoji pairs": _answer("smile \U0001f600 ", args.mb, True),
    }
    figures = {}
    for name, raw in cases.items():
        parse = _best(lambda raw=raw: json.loads(raw), args.rounds)
        scan = _best(lambda raw=raw: _SURROGATE_ESCAPE.search(raw), args.rounds)
        read = _best(lambda raw=raw: _json_object(raw), args.rounds)
        figures[name] = {"bytes": len(raw), "parse_ms": parse, "scan_ms": scan, "read_ms": read}
        print(
            f"{name}: {len(raw) / 1e6:.1f} MB; parse {parse:.1f} ms, scan {scan:.1f} ms, "
            f"read (parse, scan, any walk) {read:.1f} ms"
        )
    write_json(args.json, method, figures)


if __name__ == "__main__":
    main()
