"""Regular expressions of JSON Schema (`pattern`, `patternProperties`, `format: regex`) in bounded time.

jsonschema matches them with Python's `re`, which backtracks: `^(a+)+$` against
a run of `a`s and a `!` takes time exponential in the run's length. Here RE2
(google-re2) compiles a pattern when it can; its matching time is linear in the
text (times the pattern's size: a hostile pattern over a megabyte can still take
seconds, which is why checks run in a worker thread), and it lets go of the GIL
while it matches. Figures for both: docs/benchmarks.md ("Argument checks"). RE2
lacks what only a backtracking engine can do (lookaround, backreferences,
`\\Z`); such a pattern is matched by the `regex` module instead, which
backtracks too but gives up at the deadline it is handed (counted in the
process's CPU time). A pattern neither compiles is unusable.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import re2

from toolsearch.errors import ToolsearchError

# RE2's memory budget per pattern, its compiled program and DFA cache together: a pattern whose
# program does not fit is left to `regex`; a DFA that outgrows it falls back to RE2's NFA (slower,
# still linear). Times the patterns kept compiled, this bounds the memory patterns can take.
RE2_MAX_MEM = 2 << 20
MAX_COMPILED = 256


class PatternError(ToolsearchError, ValueError):
    """Neither RE2 nor `regex` compiles the pattern."""


class PatternTimeout(ToolsearchError, TimeoutError):
    """The deadline passed before the match finished."""


class _Re2:
    __slots__ = ("_compiled",)

    def __init__(self, compiled: re2._Regexp) -> None:
        self._compiled = compiled

    def search(self, text: str, deadline: float) -> bool:
        if time.monotonic() > deadline:
            raise PatternTimeout
        # A JSON string may hold a lone surrogate, which strict UTF-8 cannot encode.
        return self._compiled.search(text.encode("utf-8", "surrogatepass")) is not None


class _Backtracking:
    __slots__ = ("_compiled",)

    def __init__(self, compiled: Any) -> None:  # a regex.Pattern
        self._compiled = compiled

    def search(self, text: str, deadline: float) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise PatternTimeout
        try:
            # concurrent: the GIL is released while it matches, so other threads run meanwhile.
            timeout = None if math.isinf(left) else left
            return self._compiled.search(text, timeout=timeout, concurrent=True) is not None
        except TimeoutError:
            raise PatternTimeout from None


class _Unusable:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def search(self, text: str, deadline: float) -> bool:
        raise PatternError(self.reason)


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.never_capture = True  # only "does it match" is asked: no submatches to track
    options.log_errors = False  # a pattern RE2 refuses is expected, not worth a line on stderr
    return options


_OPTIONS = _re2_options()


@functools.lru_cache(maxsize=MAX_COMPILED)
def _compiled(pattern: str) -> _Re2 | _Backtracking | _Unusable:
    try:
        return _Re2(re2.compile(pattern, _OPTIONS))
    except (re2.error, UnicodeEncodeError):
        pass
    import regex  # imported only when first needed: most catalogs never need its import time

    try:
        return _Backtracking(regex.compile(pattern))
    except (regex.error, RecursionError, ValueError, OverflowError) as exc:
        return _Unusable(f"{type(exc).__name__}: {exc}"[:200])


def search(pattern: str, text: str, deadline: float) -> bool:
    """Whether `pattern` matches anywhere in `text` (JSON Schema patterns are not anchored).

    `deadline` is a `time.monotonic()` value. Raises PatternError for a pattern neither engine
    compiles, PatternTimeout when the deadline passes first.
    """
    return _compiled(pattern).search(text, deadline)


def check(pattern: str) -> None:
    """Raise PatternError when `pattern` is unusable (the `regex` format of a schema's own patterns)."""
    compiled = _compiled(pattern)
    if isinstance(compiled, _Unusable):
        raise PatternError(compiled.reason)


def engine(pattern: str) -> str:
    """Which engine matches `pattern`: "re2", "regex" or "none" (for tests and benchmarks)."""
    return {_Re2: "re2", _Backtracking: "regex", _Unusable: "none"}[type(_compiled(pattern))]
