"""Text to search terms, the same way for tool documents and for queries.

Pipeline per word: NFKC, split camelCase, casefold, drop stop words, stem,
fold diacritics. Stemming comes before folding because the Lithuanian stemmer
knows its endings with their diacritics ("-ė", "-ų").

A word cannot always tell its language, so a text is judged as a whole:
- a word with a letter only Lithuanian uses here (ą č ę ė į š ų ū ž) gets its
  Lithuanian stem, and the Lithuanian stem of its folded spelling, the form a
  person typing without diacritics produces ("įvykį" -> "ivyk" and "ivy");
- any other word gets its English stem, and in a Lithuanian text its
  Lithuanian stem too ("saskaitos", typed without diacritics, -> "saskait").
A document is Lithuanian when 15% of its words have a Lithuanian letter
(one Lithuanian name in an English description is not enough). A query is
short and often typed without diacritics, so `tokenize_query` always takes
both stems: an English document holds only English stems, so the extra query
stems rarely match there. Stemming every word of every text both ways would
count a word twice whenever its two stems differ ("time": "time", "tim") and
lose English recall (docs/benchmarks.md, "What the BM25 documents hold").

Chinese, Japanese and Korean runs have no spaces between words: they become
overlapping character bigrams (a lone character stays a unigram), the usual
answer for CJK full-text search without a dictionary.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

__all__ = [
    "fold_diacritics",
    "split_camel_case",
    "stem_variants",
    "tokenize",
    "tokenize_query",
    "tokenize_query_words",
]

# Han, kana, Hangul, bopomofo and their compatibility/extension blocks.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3040-\u309f\u30a0-\u30ff"
    "\u3100-\u312f\u3130-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
# Combining marks that belong inside words (`re` has no \p{M}): Latin/Greek/Cyrillic
# diacritics left decomposed, Hebrew/Arabic points, Indic and Thai vowel signs.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
    "\u0900-\u0963\u0966-\u0dff\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff"
    "\u20d0-\u20ff\ufe20-\ufe2f"
)
_TOKEN = re.compile(rf"([{_CJK}]+)|((?:[^\W_{_CJK}]|[{_MARKS}])+)")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
# Text with no CJK and no loose combining mark (most non-ASCII text after NFKC): _TOKEN's words are
# then plain runs of letters and digits, which this simpler pattern finds at half the cost.
_SPECIAL = re.compile(f"[{_CJK}{_MARKS}]")
_PLAIN_WORD = re.compile(r"[^\W_]+")

# Function words only: a word that could name what a tool does stays searchable.
# The second line holds what is left of contractions ("what's", "can't", "I'll").
ENGLISH_STOP_WORDS = frozenset(
    """a about above after again against am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to
    too under until up very was we were what when where which while who whom whose why will with would
    you your yours yourself yourselves please us
    s t d m ll re ve don doesn didn isn aren wasn weren wouldn shouldn couldn hasn haven hadn""".split()  # noqa: SIM905 - a block of words reads better
)
LITHUANIAN_STOP_WORDS = frozenset(
    """ir ar bet o kad jog su be iš į už per prie nuo iki apie po pas ant virš tarp dėl link pagal
    kaip kas koks kokia kokie kokios kuris kuri kurie kurios kurį kurią kada kodėl ten čia
    tai tas ta tie tos šis ši šie šios tą tų jis ji jie jos jo jų jį ją jam jai jiems joms
    aš tu mes jūs man tau mums jums mane tave mus jus mano tavo savo mūsų jūsų sau save
    yra buvo bus būti esu esi esame esate ne nei taip nes jei jeigu kai kol net dar jau tik pat vis
    gal galbūt prašau labai""".split()  # noqa: SIM905
)

# Letters whose diacritic is part of the glyph, so NFD cannot split it off.
_FOLD_EXTRA = str.maketrans(
    {"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ħ": "h", "Ħ": "H", "ı": "i"}
    | {"æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE"}
)


def fold_diacritics(text: str) -> str:
    """ "žinutė" -> "zinute": drop Latin/Greek/Cyrillic diacritics, keep base letters."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFD", text)
    stripped = "".join(ch for ch in decomposed if not "\u0300" <= ch <= "\u036f")
    return unicodedata.normalize("NFC", stripped).translate(_FOLD_EXTRA)


# Matched folded, so "už" typed as "uz" is a stop word too.
_FOLDED_STOP_WORDS = frozenset(fold_diacritics(w) for w in ENGLISH_STOP_WORDS | LITHUANIAN_STOP_WORDS)


def _is_stop_word(word: str) -> bool:
    return fold_diacritics(word) in _FOLDED_STOP_WORDS


def split_camel_case(word: str) -> list[str]:
    """ "createEvent" -> ["create", "Event"]; "HTTPServer" -> ["HTTP", "Server"]; digits stay put."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        prev, cur = word[i - 1], word[i]
        lower_to_upper = (prev.islower() or prev.isdigit()) and cur.isupper()
        acronym_end = prev.isupper() and cur.isupper() and i + 1 < len(word) and word[i + 1].islower()
        if lower_to_upper or acronym_end:
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


# Snowball stemmer objects keep per-call state, so they are not shared across threads unguarded.
_STEM_LOCK = threading.Lock()
_LITHUANIAN_LETTERS = frozenset("ąčęėįšųūžĄČĘĖĮŠŲŪŽ")
_LITHUANIAN_SHARE = 0.15  # of a text's words with a Lithuanian letter, for it to be Lithuanian
_ENGLISH = snowballstemmer.stemmer("english")
_LITHUANIAN = snowballstemmer.stemmer("lithuanian")


@lru_cache(maxsize=1 << 17)
def stem_variants(word: str, lithuanian_text: bool = False) -> tuple[str, ...]:
    """The folded stems of one lowercase word, distinct, in a stable order (see the module's doc)."""
    if not word.isalpha():  # numbers, versions ("v2"): nothing to stem
        return (fold_diacritics(word),)
    folded_word = fold_diacritics(word)
    with _STEM_LOCK:
        if _LITHUANIAN_LETTERS.intersection(word):
            stems = [_LITHUANIAN.stemWord(word), _LITHUANIAN.stemWord(folded_word)]
        else:
            stems = [_ENGLISH.stemWord(word)]
            if lithuanian_text:
                stems += [_LITHUANIAN.stemWord(word), _LITHUANIAN.stemWord(folded_word)]
    return tuple(dict.fromkeys(fold_diacritics(stem) for stem in stems))


@lru_cache(maxsize=1 << 17)
def _word_terms(word: str, lithuanian_text: bool) -> tuple[str, ...]:
    parts = split_camel_case(word)
    if len(parts) > 1:  # "GitHub": "git", "hub" and "github", so both spellings of a query match
        parts.append(word)
    terms: list[str] = []
    for part in parts:
        lowered = part.casefold()
        if not _is_stop_word(lowered):
            terms.extend(stem_variants(lowered, lithuanian_text))
    return tuple(terms)


def _cjk_terms(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _is_lithuanian(words: list[str]) -> bool:
    with_letters = sum(1 for w in words if not w.isascii() and _LITHUANIAN_LETTERS.intersection(w))
    return with_letters >= _LITHUANIAN_SHARE * len(words) > 0


def tokenize(text: str, lithuanian: bool | None = None) -> list[str]:
    """Search terms of `text`, in order, repeats kept (BM25 counts them).

    `lithuanian` says whether the text may be Lithuanian; by default, judged from its letters.
    """
    text = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    if text.isascii():  # most tool text: no CJK, no Lithuanian letters, a simpler pattern
        for word in _ASCII_WORD.findall(text):
            terms.extend(_word_terms(word, bool(lithuanian)))
        return terms
    if _SPECIAL.search(text) is None:
        words = _PLAIN_WORD.findall(text)
        if lithuanian is None:
            lithuanian = _is_lithuanian(words)
        for word in words:
            terms.extend(_word_terms(word, lithuanian))
        return terms
    pieces = _TOKEN.findall(text)  # (cjk run, word) pairs, one of them empty
    if lithuanian is None:
        lithuanian = _is_lithuanian([word for _, word in pieces if word])
    for cjk, word in pieces:
        terms.extend(_word_terms(word, lithuanian) if word else _cjk_terms(cjk))
    return terms


def tokenize_query(text: str) -> list[str]:
    """Search terms of a query: words without Lithuanian letters are stemmed both ways."""
    return tokenize(text, lithuanian=True)


@lru_cache(maxsize=1 << 17)
def _query_word_terms(word: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _word_terms(word, True), _word_terms(word, False)


def tokenize_query_words(text: str) -> tuple[list[str], list[str]]:
    """`tokenize_query(text)` and `tokenize(text, lithuanian=False)` (its words stemmed the English
    way only, `search.wording`) from one pass over the text: the same lists as the two calls."""
    text = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    words: list[str] = []
    if (ascii := text.isascii()) or _SPECIAL.search(text) is None:  # the language given: not judged
        for word in (_ASCII_WORD if ascii else _PLAIN_WORD).findall(text):
            both, english = _query_word_terms(word)
            terms.extend(both)
            words.extend(english)
        return terms, words
    for cjk, word in _TOKEN.findall(text):
        if word:
            both, english = _query_word_terms(word)
            terms.extend(both)
            words.extend(english)
        else:
            terms.extend(bigrams := _cjk_terms(cjk))
            words.extend(bigrams)
    return terms, words
