"""Text from an upstream made safe for a terminal: control, format and separator characters escaped.

Used where a person reads what the upstream sent (`toolsearch catalog`, its `--lint`, `toolsearch
explain`): an escape code in a tool's description must not repaint the screen.
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable"]

_ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def printable(text: object) -> str:
    """`text` safe for a terminal: each control, format or separator character as a `\\uXXXX` escape."""
    text = text if isinstance(text, str) else str(text)
    if text.isascii() and text.isprintable():
        return text  # the usual case, without a look at each character
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # astral (tag characters): a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
