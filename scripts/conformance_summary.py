"""Summarise a conformance run: every scenario as pass, fail, n/a or known gap, with the reason.

The proxy is a tools-only, stateless server for two protocol eras, so many of the suite's
scenarios test features it does not offer. Which ones, and why, is written down here once;
anything else that fails is a real failure and makes the exit status 1.

Usage: python scripts/conformance_summary.py RESULTS_DIR
RESULTS_DIR holds one directory per leg (`direct-2026-07-28`, `pinned-2025-11-25`...), each
holding the suite's `server-<scenario>-<timestamp>/checks.json`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

NO_FIXTURE_TOOLS = "needs the suite's fixture tools; run in the pinned leg instead"
NOT_APPLICABLE: dict[str, str] = {
    "completion-complete": "no completions capability (tools only)",
    "logging-set-level": "no logging capability (tools only)",
    "tools-call-with-logging": "no logging capability (tools only)",
    "tools-call-sampling": "server-to-client sampling: the proxy is stateless and has no such tool",
    "tools-call-elicitation": "server-to-client elicitation: the proxy is stateless and has no such tool",
    "elicitation-sep1034-defaults": "elicitation: not offered",
    "elicitation-sep1330-enums": "elicitation: not offered",
    "resources-list": "no resources capability (tools only)",
    "resources-read-text": "no resources capability (tools only)",
    "resources-read-binary": "no resources capability (tools only)",
    "resources-templates-read": "no resources capability (tools only)",
    "resources-subscribe": "no resources capability (tools only)",
    "resources-unsubscribe": "no resources capability (tools only)",
    "prompts-list": "no prompts capability (tools only)",
    "prompts-get-simple": "no prompts capability (tools only)",
    "prompts-get-with-args": "no prompts capability (tools only)",
    "prompts-get-embedded-resource": "no prompts capability (tools only)",
    "prompts-get-with-image": "no prompts capability (tools only)",
}
for _name in (
    "basic-elicitation",
    "basic-sampling",
    "basic-list-roots",
    "request-state",
    "multiple-input-requests",
    "multi-round",
    "non-tool-request",
    "result-type",
    "tampered-state",
    "capability-check",
    "ignore-extra-params",  # these three pass only because the unknown tool is an error
    "missing-input-response",
    "validate-input",
):
    NOT_APPLICABLE[f"input-required-result-{_name}"] = (
        "MRTR input requests: needs the suite's test_input_required_* tools; the proxy's tools never ask"
    )
for _name in (
    "lifecycle",
    "capability-negotiation",
    "wire-fields",
    "request-state-removal",
    "mrtr-input",
    "request-headers",
    "dispatch-and-envelope",
    "status-notifications",
    "required-task-error",
    "mrtr-composition",
):
    NOT_APPLICABLE[f"tasks-{_name}"] = "tasks extension (SEP-2663): not offered; optional by definition"

for _name in ("directory", "enumeration", "manifest"):
    NOT_APPLICABLE[f"sep-2640-skills-{_name}"] = "skills extension (SEP-2640): not declared, so all skip"

# Scenarios that only the leg without the suite's fixture tools cannot run.
DIRECT_ONLY_NOT_APPLICABLE = {
    "tools-call-simple-text": NO_FIXTURE_TOOLS,
    "tools-call-image": NO_FIXTURE_TOOLS,
    "tools-call-audio": NO_FIXTURE_TOOLS,
    "tools-call-embedded-resource": NO_FIXTURE_TOOLS,
    "tools-call-mixed-content": NO_FIXTURE_TOOLS,
    "tools-call-error": NO_FIXTURE_TOOLS,
    "tools-call-with-progress": NO_FIXTURE_TOOLS,
    "json-schema-2020-12": NO_FIXTURE_TOOLS,
    "http-custom-header-server-validation": "the five tools declare no x-mcp-header; the pinned leg has one",
}


# Inside a scenario that applies, a failing check is excused only when the suite itself marks it
# "Not testable" (it needs a fixture tool the proxy does not have): no list of our own.
def not_testable(check: dict) -> bool:
    details = check.get("details")
    marked = isinstance(details, dict) and details.get("untestable") is True
    return marked or str(check.get("errorMessage") or "").startswith("Not testable")


# Why an applicable scenario warns, where the warning is by design.
WARNING_NOTES = {
    "server-sse-multiple-streams": "stateless: no Mcp-Session-Id, JSON answers (SSE is optional)",
    "server-sse-polling": "stateless: no Mcp-Session-Id, JSON answers (SSE is optional)",
    "sep-2164-resource-not-found": "no resources capability, so resources/read is -32601 Method not found",
}

# Failures that are real but accepted for now, with what it would take: (leg kind, scenario) -> why.
KNOWN_GAPS: dict[tuple[str, str], str] = {}

_TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
# A wire-schema failure is the proxy sending an invalid message: always a failure.
ALWAYS_COUNTS = {"wire-schema-valid"}


def scenario_name(directory: Path) -> str:
    return _TIMESTAMP.sub("", directory.name).removeprefix("server-")


def judge(leg: str, scenario: str, checks: list[dict]) -> tuple[str, str]:
    """The verdict for one scenario run and a short reason or list of failing checks."""
    kind = leg.split("-", 1)[0]  # direct | pinned
    failing = [c for c in checks if c.get("status") == "FAILURE"]
    schema_failures = [c for c in failing if c.get("id") in ALWAYS_COUNTS]
    if schema_failures:
        return "FAIL", "wire-schema-valid: the proxy sent a message the spec's schema rejects"
    reason = NOT_APPLICABLE.get(scenario) or (
        DIRECT_ONLY_NOT_APPLICABLE.get(scenario) if kind == "direct" else None
    )
    if reason:
        return ("N/A", reason) if failing else ("N/A", f"passes, but trivially: {reason}")
    real = [c for c in failing if not not_testable(c)]
    excused = sorted({c["id"] for c in failing if c not in real})
    if not real:
        warnings = sum(1 for c in checks if c.get("status") == "WARNING")
        notes = (
            [f"{len(excused)} check(s) the suite marks Not testable: " + ", ".join(excused)]
            if excused
            else []
        )
        if warnings:
            notes.append(
                f"{warnings} warning(s)"
                + (f": {WARNING_NOTES[scenario]}" if scenario in WARNING_NOTES else "")
            )
        return "PASS", "; ".join(notes)
    if (kind, scenario) in KNOWN_GAPS:
        return "GAP", KNOWN_GAPS[(kind, scenario)]
    return "FAIL", "; ".join(f"{c.get('id')}: {str(c.get('errorMessage') or '')[:160]}" for c in real)


def main(results: Path) -> int:
    failed = 0
    legs = sorted(p for p in results.iterdir() if p.is_dir())
    if not legs:
        print(f"no results under {results}")
        return 1
    totals: dict[str, int] = {"FAIL": 0, "GAP": 0}  # said even when none
    for leg in legs:
        runs = sorted(leg.glob("*/checks.json"))
        print(f"\n== {leg.name} ({len(runs)} scenarios)")
        if not runs:
            print("   FAIL  no scenario ran (did the server start?)")
            failed += 1
        for checks_file in runs:
            scenario = scenario_name(checks_file.parent)
            verdict, reason = judge(leg.name, scenario, json.loads(checks_file.read_text()))
            totals[verdict] = totals.get(verdict, 0) + 1
            failed += verdict == "FAIL"
            print(f"   {verdict:<5} {scenario}" + (f"  -- {reason}" if reason else ""))
    print("\n" + ", ".join(f"{verdict}: {count}" for verdict, count in sorted(totals.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
