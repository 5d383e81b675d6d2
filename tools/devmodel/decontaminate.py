"""Training requests too close to the evaluation set's questions: the check that keeps it a test set.

The evaluation set (`shared/toolsearch/data/questions`) is held out. Its questions were written by
the same kind of model that writes the synthetic requests, so even requests written without seeing
it can come out nearly the same ("stop that build, I pushed the wrong branch"). A request is too
close to a question (its English or Lithuanian words, or the query a model wrote for it) when their
word sets overlap by half or more (Jaccard), or when they share a run of five words; a text of three
words or fewer only when the words are the same (short search queries coincide by nature).

`python -m tools.devmodel.decontaminate [--drop] [REQUESTS_DIR]` prints each such request and exits
1 when there is any; `--drop` empties those fields in the files instead (a request file allows empty
fields). `tests/test_devmodel_decontamination.py` holds the committed requests to none.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from toolsearch.cli import evaluation

from .config import HERE

OVERLAP = 0.5
RUN = 5
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _runs(tokens: list[str]) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + RUN]) for i in range(len(tokens) - RUN + 1)}


@dataclass(frozen=True)
class Closest:
    question_id: str
    question: str
    overlap: float


class Questions:
    """Every phrasing of every evaluation question, indexed by word."""

    def __init__(self, asked: list[tuple[str, str]]) -> None:
        self._asked = asked
        self._words = [set(words(text)) for _, text in asked]
        self._runs = [_runs(words(text)) for _, text in asked]
        self._by_word: dict[str, list[int]] = defaultdict(list)
        for index, tokens in enumerate(self._words):
            for word in tokens:
                self._by_word[word].append(index)

    @classmethod
    def read(cls) -> Questions:
        """Every phrasing of the evaluation set's questions, as `toolsearch eval` reads them."""
        return cls(
            [
                (question.id, text)
                for question in evaluation.load_questions()
                for text in [*question.text.values(), *question.model_query.values()]
            ]
        )

    def closest(self, text: str) -> Closest | None:
        """The question `text` is too close to, or None."""
        tokens = words(text)
        mine, my_runs = set(tokens), _runs(tokens)
        best: tuple[float, int] | None = None
        for index in {i for word in mine for i in self._by_word.get(word, ())}:
            theirs = self._words[index]
            overlap = len(mine & theirs) / len(mine | theirs)
            if len(mine) <= 3 or len(theirs) <= 3:
                close = overlap == 1.0
            else:
                close = overlap >= OVERLAP or bool(my_runs & self._runs[index])
            if close and (best is None or overlap > best[0]):
                best = (overlap, index)
        if best is None:
            return None
        question_id, question = self._asked[best[1]]
        return Closest(question_id, question, round(best[0], 2))


def check(folder: Path, questions: Questions, *, drop: bool = False) -> list[str]:
    """A line for each request too close to a question; with `drop`, those fields are emptied."""
    found = []
    for path in sorted(folder.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if not line.strip() or line.lstrip().startswith(("#", "==")):
                continue
            tool, *texts = [field.strip() for field in line.split("|")]
            for position, text in enumerate(texts):
                closest = questions.closest(text) if text else None
                if closest is not None:
                    found.append(
                        f"{path.name}:{number + 1} {tool}: {text!r} ~ {closest.question_id} "
                        f"({closest.overlap:.2f}): {closest.question!r}"
                    )
                    texts[position] = ""
            if drop:
                lines[number] = " | ".join([tool, *texts]).rstrip()
        if drop:
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.devmodel.decontaminate", description=__doc__)
    parser.add_argument("folder", nargs="?", type=Path, default=HERE / "data" / "requests")
    parser.add_argument("--drop", action="store_true", help="empty the fields that are too close")
    args = parser.parse_args(argv)
    found = check(args.folder, Questions.read(), drop=args.drop)
    print("\n".join(found))
    print(f"{len(found)} requests too close to an evaluation question" + (", dropped" if args.drop else ""))
    return 1 if found and not args.drop else 0


if __name__ == "__main__":
    sys.exit(main())
