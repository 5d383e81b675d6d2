"""What `python -m tools.searchbench proxy` prints: figures through the proxy beside in process,
per source and phrasing and pooled, then every request whose ranks differ and why.

Keys, ranks and causes only: never a request's text or a query.
"""

from __future__ import annotations

from collections.abc import Sequence

from .measure import KS
from .through_proxy import MAX_QUERY_CHARS, Compared, SourceRun


def figures(ranks: Sequence[int | None]) -> dict[str, float]:
    """R@1, R@3, R@5 and MRR of requests' first ranks, as measure.py counts them."""
    n = len(ranks) or 1
    out = {f"R@{k}": sum(r is not None and r <= k for r in ranks) / n for k in KS}
    out["MRR"] = sum(1.0 / r for r in ranks if r) / n
    return out


def _row(label: str, phrasing: str, rows: Sequence[Compared]) -> str:
    proxy = figures([r.through_proxy for r in rows])
    mine = figures([r.in_process for r in rows])
    pairs = " ".join(f"{proxy[m]:.3f}/{mine[m]:.3f}" for m in ("R@1", "R@3", "R@5", "MRR"))
    worse = sum(_worse(r) for r in rows)
    differ = sum(r.differs for r in rows)
    cut = sum(r.cut for r in rows)
    weak = sum(r.weak for r in rows)
    weak_found = sum(r.weak and _top5(r.through_proxy) for r in rows)
    return (
        f"{label:<18} {phrasing:<5} {len(rows):>5} {pairs}  {differ:>6} {worse:>5} {cut:>4} {weak:>4}"
        f" {weak_found:>7}"
    )


def _worse(row: Compared) -> bool:
    """Ranked lower through the proxy (or lost) than in process."""
    if row.in_process is None:
        return False
    return row.through_proxy is None or row.through_proxy > row.in_process


def render(runs: Sequence[SourceRun]) -> str:
    lines = [
        "through the proxy / in process (hybrid, learned ranker, bundled model); limit 10, schemas false",
        "differ: ranks not the same; worse: lower or lost through the proxy; cut: a query cut at"
        f" {MAX_QUERY_CHARS} characters; weak: answers marked a weak match; weak@5: of those, a needed tool"
        " in the top 5",
        f"{'source':<18} {'asked':<5} {'n':>5} {'R@1':^11} {'R@3':^11} {'R@5':^11} {'MRR':^11}"
        f"  {'differ':>6} {'worse':>5} {'cut':>4} {'weak':>4} {'weak@5':>7}",
    ]
    every = [row for run in runs for row in run.rows]
    for label, rows in [*((run.source, run.rows) for run in runs), ("all", every)]:
        for phrasing in ("model", "raw"):
            chosen = [r for r in rows if r.phrasing == phrasing]
            if chosen:
                lines.append(_row(label, phrasing, chosen))
    lines.append("")
    lines.append("listing and logs:")
    for run in runs:
        dropped = ", ".join(f"{tool} ({why})" for tool, why in sorted(run.dropped.items())) or "none dropped"
        lines.append(
            f"  {run.source}: {run.listed} listed, {run.kept} in the proxy's catalog ({dropped}); "
            f"proxy log {run.log_lines} lines, {run.log_leaks} holding a query; asked in {run.seconds:.1f} s"
        )
    differing = [row for row in every if row.differs]
    lines.append("")
    lines.append(
        f"requests ranked differently ({len(differing)}): source key asked in-process -> proxy: cause"
    )
    for row in differing:
        lines.append(
            f"  {row.source} {row.key} {row.phrasing} {_rank(row.in_process)} -> {_rank(row.through_proxy)}:"
            f" {row.cause}"
        )
    lines.append("")
    lines.append(_cut_summary(every))
    return "\n".join(lines)


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def _cut_summary(rows: Sequence[Compared]) -> str:
    """What cutting long queries at max_query_chars costs, per source."""
    parts = []
    for source in dict.fromkeys(r.source for r in rows):
        cut = [r for r in rows if r.source == source and r.cut]
        if not cut:
            continue
        worse = sum(_worse(r) for r in cut)
        better = sum(r.differs and not _worse(r) for r in cut)
        lost1 = sum((r.in_process == 1) - (r.through_proxy == 1) for r in cut)
        lost5 = sum(_top5(r.in_process) - _top5(r.through_proxy) for r in cut)
        parts.append(
            f"  {source}: {len(cut)} cut, {worse} ranked lower, {better} higher;"
            f" top-1 {-lost1:+d}, top-5 {-lost5:+d}"
        )
    head = f"queries cut at {MAX_QUERY_CHARS} characters (searched whole in process):"
    return "\n".join([head, *parts]) if parts else head + " none"


def _top5(rank: int | None) -> int:
    return int(rank is not None and rank <= 5)
