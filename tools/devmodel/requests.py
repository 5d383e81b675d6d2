"""The synthetic requests (data/requests/*.txt): what users and models would ask of each real tool.

Format: `== kind:name@version` starts a server (as in sources.lock); then one line per tool,
`tool | terse query | user's words | user's words | Lithuanian | Lithuanian` (fields may be empty);
`#` starts a comment. The first field after the name is the terse, search-box style query a model
writes; the next two are a user's own words (avoiding the tool's words); the last two Lithuanian.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

KINDS = ("terse", "user", "user", "lt", "lt")
LANGUAGE = {"terse": "en", "user": "en", "lt": "lt"}


@dataclass(frozen=True)
class Request:
    server: str  # the source's name (sources.Source.name)
    tool: str
    text: str
    kind: str  # terse, user, lt

    @property
    def language(self) -> str:
        return LANGUAGE[self.kind]


def read_requests(folder: Path) -> list[Request]:
    requests = []
    for path in sorted(folder.glob("*.txt")):
        server = ""
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("=="):
                spec = line[2:].strip().split(":", 1)[-1]
                server = spec.rsplit("@", 1)[0] if "@" in spec[1:] else spec
                continue
            if not server:
                raise SystemExit(f"{path}:{number}: a request before any `== server` line")
            tool, *texts = [field.strip() for field in line.split("|")]
            if len(texts) > len(KINDS):
                raise SystemExit(f"{path}:{number}: more than {len(KINDS)} requests")
            requests += [
                Request(server, tool, text, kind)
                for text, kind in zip(texts, KINDS[: len(texts)], strict=True)
                if text
            ]
    return requests
