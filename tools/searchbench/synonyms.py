"""Build the synonym table search expands tool names with (`shared/toolsearch/data/synonyms.tsv.gz`).

From WordNet 3.0 (Debian's `wordnet-base`, pinned in tools/devmodel/wordnet-packages.lock, the
package the development model's WordNet pairs come from): for every lemma with sense-tagged
occurrences in WordNet's corpus, the other one-word lemmas of its two most frequent synsets in any
part of speech, as search terms (`tokenize`: stemmed), one line a lemma: `lemma<TAB>term term ...`
(no terms for some). What the table is for: `toolsearch.search.synonyms`.

    python -m tools.searchbench.synonyms [--downloads DIR]
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

from tools.devmodel.gettext_pairs import fetch_debs, read_lock
from tools.devmodel.wordnet_pairs import wordnet_files
from toolsearch.search.text import tokenize

LOCK = Path(__file__).resolve().parents[1] / "devmodel" / "wordnet-packages.lock"
SYNONYMS = Path(__file__).resolve().parents[2] / "shared" / "toolsearch" / "data" / "synonyms.tsv.gz"
POS = ("noun", "verb", "adj", "adv")
SENSES_KEPT = 2


def synonyms(files: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each tagged lemma's other one-word lemmas in its first SENSES_KEPT synsets of each part of speech."""
    found: dict[str, set[str]] = {}
    for pos in POS:
        members: dict[str, list[str]] = {}
        for line in files.get(f"data.{pos}", []):
            if line.startswith(" "):
                continue
            head = line.split(" | ")[0].split()
            count = int(head[3], 16)
            members[head[0]] = [head[4 + 2 * i].split("(")[0].lower() for i in range(count)]
        for line in files.get(f"index.{pos}", []):
            if line.startswith(" "):
                continue
            fields = line.split()
            pointers = int(fields[3])
            if int(fields[5 + pointers]) == 0:  # never seen in the sense-tagged corpus
                continue
            lemma, offsets = fields[0], fields[6 + pointers :]
            words = found.setdefault(lemma, set())
            for offset in offsets[:SENSES_KEPT]:
                words.update(w for w in members.get(offset, []) if "_" not in w and w != lemma)
    return found


def table(found: dict[str, set[str]]) -> str:
    lines = []
    for lemma in sorted(found):
        text = " ".join(w.replace("-", " ") for w in sorted(found[lemma]))
        # A lemma without synonyms stays: a word WordNet knows as it is is not taken for a plural.
        lines.append(f"{lemma}\t{' '.join(dict.fromkeys(tokenize(text)))}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--downloads", type=Path, default=Path(".cache/debs"), help="the .deb is kept here")
    args = parser.parse_args()
    (deb,) = fetch_debs(read_lock(LOCK), args.downloads)
    text = table(synonyms(wordnet_files(deb)))
    SYNONYMS.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    print(f"wrote {SYNONYMS}: {text.count(chr(10))} lemmas")


if __name__ == "__main__":
    main()
