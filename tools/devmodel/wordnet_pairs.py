"""English paraphrase pairs from WordNet 3.0 (Debian's `wordnet-base`): words and what they mean.

A static model learns that "film" and "movie" are near only from texts that put them side by side;
WordNet does that for the whole common vocabulary. From each synset that is among the two most
frequent senses of a word seen in WordNet's sense-tagged corpus (the `index.*` files' tag counts):

- (definition, its words): "a form of entertainment that enacts a story ..." -> "movie, film, picture"
- (word, word) for the synset's other words: "movie" -> "film".

Proper nouns and multi-word entries with capitals are skipped.
"""

from __future__ import annotations

import io
import itertools
import subprocess
import tarfile
from pathlib import Path

from .gettext_pairs import fetch_debs, read_lock

POS = ("verb", "adj", "adv", "noun")
SENSES_KEPT = 2  # a word's most frequent senses (WordNet orders a lemma's synsets by frequency)
MAX_SYNONYM_PAIRS = 3  # per synset


def common_synsets(index_lines: list[str]) -> set[str]:
    """Offsets of the first SENSES_KEPT synsets of every lemma with sense-tagged occurrences."""
    kept: set[str] = set()
    for line in index_lines:
        if line.startswith(" "):
            continue
        fields = line.split()
        pointers = int(fields[3])
        tagged = int(fields[5 + pointers])
        offsets = fields[6 + pointers :]
        if tagged > 0:
            kept.update(offsets[:SENSES_KEPT])
    return kept


def synset_pairs(data_lines: list[str], kept: set[str]) -> list[tuple[str, str]]:
    pairs = []
    for line in data_lines:
        if line.startswith(" "):
            continue
        head, _, gloss = line.partition(" | ")
        fields = head.split()
        if fields[0] not in kept:
            continue
        count = int(fields[3], 16)
        words = [fields[4 + 2 * i].split("(")[0].replace("_", " ") for i in range(count)]
        words = list(dict.fromkeys(w for w in words if w == w.lower()))
        definition = gloss.split('; "')[0].split('"')[0].strip(" ;")
        if not words or len(definition) < 8:
            continue
        pairs.append((definition, ", ".join(words)))
        pairs.extend(itertools.islice(itertools.combinations(words, 2), MAX_SYNONYM_PAIRS))
    return pairs


def wordnet_files(deb: Path) -> dict[str, list[str]]:
    """The package's WordNet `data.*` and `index.*` files by name, as lines."""
    proc = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, capture_output=True)
    files: dict[str, list[str]] = {}
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if member.isfile() and "/wordnet/" in member.name and name.split(".")[0] in ("data", "index"):
                files[name] = tar.extractfile(member).read().decode("latin-1").splitlines()  # type: ignore[union-attr]
    return files


def load_pairs(lock: Path, downloads: Path) -> list[tuple[str, str]]:
    """(text, related text) pairs from the pinned wordnet-base package."""
    (deb,) = fetch_debs(read_lock(lock), downloads)
    files = wordnet_files(deb)
    pairs: list[tuple[str, str]] = []
    for pos in POS:
        pairs += synset_pairs(files.get(f"data.{pos}", []), common_synsets(files.get(f"index.{pos}", [])))
    return list(dict.fromkeys(pairs))
