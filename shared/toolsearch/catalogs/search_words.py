"""The operator's own search words per tool: a small JSON file, read once at start-up.

`{"tool name": "extra words", ...}` (the `search_words_file` setting): each tool's words are
indexed with it (`search.index.make_indexer`), so an operator can make a tool findable without
changing the upstream. The operator wrote the file, so anything wrong in it stops start-up with
what and where, rather than being skipped as an odd upstream hint is.
"""

from __future__ import annotations

import json

from toolsearch.errors import ToolsearchError
from toolsearch.ops.files import read_at_most

MAX_FILE_BYTES = 256 * 1024
MAX_ENTRIES = 2_000
MAX_WORDS_CHARS = 500  # per tool: a few phrasings, not a second description
MAX_NAME_CHARS = 256  # as tooldefs.MAX_NAME_CHARS


class SearchWordsError(ToolsearchError, ValueError):
    """The file is missing, too large, or not of the expected shape (a ValueError: cli exits 2)."""


def load_search_words(path: str) -> dict[str, str]:
    """The words by tool name; {} when `path` is empty."""
    if not path:
        return {}
    where = f"search_words_file {path}"
    try:
        data = read_at_most(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise SearchWordsError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    if data is None:
        raise SearchWordsError(f"{where}: larger than {MAX_FILE_BYTES:,} bytes")
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise SearchWordsError(f"{where}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise SearchWordsError(f'{where}: expected an object {{"tool name": "extra words"}}')
    if len(raw) > MAX_ENTRIES:
        raise SearchWordsError(f"{where}: {len(raw):,} tools, at most {MAX_ENTRIES:,}")
    for name, words in raw.items():
        if not name or len(name) > MAX_NAME_CHARS:
            raise SearchWordsError(f"{where}: a tool name is empty or longer than {MAX_NAME_CHARS}")
        if not isinstance(words, str):
            raise SearchWordsError(f"{where}: the words for {name!r} are not a string")
        if len(words) > MAX_WORDS_CHARS:
            raise SearchWordsError(f"{where}: the words for {name!r} exceed {MAX_WORDS_CHARS} characters")
    return {name: words for name, words in raw.items() if words.strip()}
